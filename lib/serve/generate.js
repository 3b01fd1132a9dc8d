'use strict';

// Triton's generate extension: POST /v2/models/{m}[/versions/{v}]/generate and
// .../generate_stream. The body is a JSON object of the model's inputs by name (a value, or
// flat or nested lists), with "id" and "parameters" beside them; an answer is a JSON object of
// the outputs by name, after "id", "model_name" and "model_version". generate_stream answers as
// server-sent events, a `data:` event per response: each step of a decoupled model
// (decoupled.js), or a plain model's one answer. A failure before the first event is an HTTP
// error as infer's; after it, a last event `{"error": …}`.

const { bad } = require('./reasons');
const { readBody } = require('./body');
const { fail, JSON_TYPE } = require('./respond');
const { outcomeOf } = require('./outcomes');
const { parseInfer } = require('./infer-request');
const { jsonData } = require('./infer-response');
const { resolveVersion, settle, logRequest } = require('./context');
const { admit, deadline, runOptions } = require('./schedule');
const { runDecoupled } = require('./decoupled');
const { runTimed } = require('../pool');

/** The generate body as an infer request's JSON: each input of `sig` from its key. */
function inferBody(sig, body, name) {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw bad('the request must be a JSON object of input names to values');
  if (sig.maxBatch !== undefined) throw bad(`model "${name}" batches requests: generate takes a model of fixed shapes; use infer`);
  for (const key of Object.keys(body)) {
    if (key !== 'id' && key !== 'parameters' && !sig.byName.has(key)) throw bad(`"${key}" is not an input of model "${name}" (its inputs: ${sig.inputList})`);
  }
  const inputs = sig.inputs.map((i) => {
    if (!Object.hasOwn(body, i.name)) throw bad(`input "${i.name}" is missing (the model takes ${sig.inputList})`);
    const value = body[i.name];
    return { name: i.name, datatype: i.datatype, shape: i.shape, data: Array.isArray(value) ? value : [value] };
  });
  return Buffer.from(JSON.stringify({ id: body.id, parameters: body.parameters, inputs }));
}

/** One response: the outputs by name, as infer writes their values. */
async function responseText(v, id, tensors) {
  const parts = [];
  if (id !== undefined) parts.push(`"id":${JSON.stringify(id)}`);
  parts.push(`"model_name":${JSON.stringify(v.model.name)}`, `"model_version":${JSON.stringify(v.version)}`);
  for (const o of v.signature.outputs) {
    const text = await jsonData(o.datatype, tensors[o.index].data);
    parts.push(`${JSON.stringify(o.name)}:${typeof text === 'string' ? text : text.toString('utf8')}`);
  }
  return `{${parts.join(',')}}`;
}

/** A generate or generate_stream request, from its body to its last answer and its count in the metrics. */
function generate(ctx, req, res, name, versionText, stream) {
  ctx.state.active++;
  const started = performance.now();
  const claim = { bytes: 0 };
  const controller = new AbortController();
  let v;
  let events = false;
  let outcome = 'success';
  res.once('close', () => {
    if (!res.writableFinished) controller.abort(Object.assign(new Error('the client went away'), { name: 'AbortError' }));
  });
  const event = (text) => {
    if (!events) res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    events = true;
    res.write(`data: ${text}\n\n`);
  };
  readBody(req, { maxBody: ctx.config.maxBody, budget: ctx.budget, claim })
    .then(async (bytes) => {
      v = resolveVersion(ctx, name, versionText);
      let body;
      try {
        body = JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
      } catch (err) {
        throw bad(`the request body is not JSON: ${err.message}`);
      }
      const json = inferBody(v.signature, body, name);
      const request = parseInfer(v.signature, json, json.length);
      if (request.shmInputs !== undefined || request.sequence !== undefined) throw bad('generate takes no shared memory or sequence_id');
      if (v.config.decoupled !== undefined) {
        if (!stream) throw bad(`model "${name}" is decoupled (several responses a request): use generate_stream`);
        let last = Promise.resolve();
        await runDecoupled(v, request.inputs, controller.signal, (tensors) => {
          // Each step's text in order, written as it is made.
          last = last.then(() => responseText(v, request.id, tensors)).then((text) => (res.destroyed ? undefined : event(text)));
        });
        await last;
        return;
      }
      const options = runOptions(v.pool, controller.signal, admit(v, request, name), deadline(v.config, request.timeoutUs, name));
      const text = await responseText(v, request.id, await runTimed(v.pool, request.inputs, options));
      if (stream) event(text);
      else {
        res.writeHead(200, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(text) });
        res.end(text);
      }
    })
    .catch((err) => {
      const o = outcomeOf(err, name, v);
      outcome = o.outcome;
      if (res.destroyed) return;
      if (events) event(JSON.stringify({ error: o.message }));
      else if (o.http !== 0) fail(res, o.http, o.message, o.headers);
    })
    .finally(() => {
      if (events && !res.destroyed) res.end();
      ctx.budget.release(claim.bytes);
      const seconds = (performance.now() - started) / 1000;
      const label = v !== undefined || ctx.repository.models.has(name) ? name : '_unknown';
      ctx.metrics.count(label, v === undefined ? '' : v.version, outcome, seconds, 'rest', 0, 0);
      if (ctx.logging.verboseAt(1)) logRequest(ctx, name, v, outcome, seconds, 'rest');
      settle(ctx);
    });
}

module.exports = { generate };
