'use strict';

// gRPC's LogSettings and TraceSetting messages (Triton's grpc_service.proto): requests decoded
// into the settings objects REST takes, answers written from the objects REST sends.

const { Writer, schema, decode } = require('../protocol/pb');

const WIRE_LEN = 2;
const WIRE_VARINT = 0;

const LogValue = schema([
  [1, 'boolParam', 'bool'],
  [2, 'uint32Param', 'uint32'],
  [3, 'stringParam', 'string'],
]);
const LogEntry = schema([
  [1, 'key', 'string'],
  [2, 'value', 'message', { schema: LogValue }],
]);
const LogSettingsRequest = schema([[1, 'settings', 'map', { schema: LogEntry }]]);

const TraceValue = schema([[1, 'value', 'string', { repeated: true }]]);
const TraceEntry = schema([
  [1, 'key', 'string'],
  [2, 'value', 'message', { schema: TraceValue }],
]);
const TraceSettingRequest = schema([
  [1, 'settings', 'map', { schema: TraceEntry }],
  [2, 'modelName', 'string'],
]);

/** A LogSettingsRequest's bytes as `{ settings }`: each setting the value its oneof holds. */
function decodeLogSettings(buf) {
  const msg = decode(LogSettingsRequest, buf);
  const settings = {};
  for (const { key, value } of msg.settings) settings[key] = value === undefined ? undefined : (value.boolParam ?? value.uint32Param ?? value.stringParam);
  return { settings };
}

/** A TraceSettingRequest's bytes as `{ settings, model }`: an empty value clears the setting (null), as tritonclient sends None. */
function decodeTraceSetting(buf) {
  const msg = decode(TraceSettingRequest, buf);
  const settings = {};
  for (const { key, value } of msg.settings) {
    const list = value === undefined ? [] : value.value;
    settings[key] = list.length === 0 ? null : list;
  }
  return { settings, model: msg.modelName === undefined || msg.modelName === '' ? undefined : msg.modelName };
}

/** A LogSettingsResponse from the settings object: booleans, the verbose level as uint32, strings; each written even when false, 0 or "" (a oneof's member is present). */
function encodeLogSettings(settings) {
  const w = new Writer();
  for (const [key, v] of Object.entries(settings)) {
    const value = new Writer();
    if (typeof v === 'string') {
      value.tag(3, WIRE_LEN);
      value.varint(Buffer.byteLength(v));
      value.raw(Buffer.from(v));
    } else {
      value.tag(typeof v === 'boolean' ? 1 : 2, WIRE_VARINT);
      value.varint(Number(v));
    }
    const entry = new Writer();
    entry.string(1, key);
    entry.message(2, value);
    w.message(1, entry);
  }
  return w.finish();
}

/** A TraceSettingResponse from the settings object: every value a list of strings. */
function encodeTraceSetting(settings) {
  const w = new Writer();
  for (const [key, v] of Object.entries(settings)) {
    const value = new Writer();
    for (const s of Array.isArray(v) ? v : [v]) {
      value.tag(1, WIRE_LEN);
      value.varint(Buffer.byteLength(s));
      value.raw(Buffer.from(s));
    }
    const entry = new Writer();
    entry.string(1, key);
    entry.message(2, value);
    w.message(1, entry);
  }
  return w.finish();
}

module.exports = { decodeLogSettings, decodeTraceSetting, encodeLogSettings, encodeTraceSetting };
