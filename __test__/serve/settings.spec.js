'use strict';

// Triton's logging and trace extensions (GET/POST /v2/logging, /v2/trace/setting and
// /v2/models/{m}/trace/setting; gRPC LogSettings and TraceSetting), with the real tritonclient
// over both protocols: the round trips, then what each setting does to the log and to which
// requests an OpenTelemetry SDK set up in this process is given a trace.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const api = require('@opentelemetry/api');
const { BasicTracerProvider, SimpleSpanProcessor, InMemorySpanExporter } = require('@opentelemetry/sdk-trace-base');
const { makeRepository, listenInProcess, servedRepo, pythonClient, hasClients } = require('../serve/setup');
const { request } = require('../serve/wire');

const LOG_DEFAULTS = { log_file: '', log_info: true, log_warning: true, log_error: true, log_verbose_level: 0, log_format: 'default' };
const TRACE_DEFAULTS = { trace_level: ['TIMESTAMPS'], trace_rate: '1', trace_count: '-1', log_frequency: '0', trace_file: '', trace_mode: 'opentelemetry' };
const STATUS = { http: { bad: '400', missing: '400' }, grpc: { bad: 'StatusCode.INVALID_ARGUMENT', missing: 'StatusCode.NOT_FOUND' } };

const addBody = JSON.stringify({ inputs: [{ name: 'a', datatype: 'FP32', shape: [4], data: [1, 2, 3, 4] }, { name: 'b', datatype: 'FP32', shape: [4], data: [0, 0, 0, 0] }] });

(hasClients ? describe : describe.skip)("Triton's log and trace settings", () => {
  const live = servedRepo(() => makeRepository().repo);

  for (const protocol of ['http', 'grpc']) {
    test(`${protocol}: tritonclient reads and changes them, all or none, and a model's own trace settings fall back to the server's`, async () => {
      const calls = [
        ['get_log_settings', {}],
        ['update_log_settings', { settings: { log_verbose_level: 1, log_format: 'ISO8601' } }],
        ['update_log_settings', { settings: { log_info: false, log_format: 'fancy' } }],
        ['update_log_settings', { settings: { log_verbose_level: 0, log_format: 'default' } }],
        ['get_trace_settings', {}],
        ['update_trace_settings', { settings: { trace_rate: '10', trace_count: '5' } }],
        ['update_trace_settings', { model_name: 'add', settings: { trace_level: ['OFF'], trace_rate: '2' } }],
        ['get_trace_settings', { model_name: 'add' }],
        ['update_trace_settings', { model_name: 'add', settings: { trace_level: null, trace_rate: null } }],
        ['update_trace_settings', { settings: { trace_level: ['TENSORS'] } }],
        ['update_trace_settings', { settings: { trace_rate: '1', trace_count: '-1' } }],
        ['get_trace_settings', { model_name: 'nope' }],
      ];
      const seen = await pythonClient('settings_client.py', protocol, [protocol, `127.0.0.1:${protocol === 'http' ? live.server.port : live.grpcPort}`], JSON.stringify(calls));
      const { bad, missing } = STATUS[protocol];
      expect(seen).toEqual([
        LOG_DEFAULTS,
        { ...LOG_DEFAULTS, log_verbose_level: 1, log_format: 'ISO8601' },
        // Refused whole: log_info stays on.
        { error: [bad, 'log setting "log_format" must be "default" or "ISO8601", got "fancy"'] },
        LOG_DEFAULTS,
        TRACE_DEFAULTS,
        { ...TRACE_DEFAULTS, trace_rate: '10', trace_count: '5' },
        { ...TRACE_DEFAULTS, trace_level: ['OFF'], trace_rate: '2', trace_count: '5' },
        { ...TRACE_DEFAULTS, trace_level: ['OFF'], trace_rate: '2', trace_count: '5' },
        { ...TRACE_DEFAULTS, trace_rate: '10', trace_count: '5' },
        { error: [bad, 'trace setting "trace_level": TENSORS is not recorded by this server (its traces hold timestamps: the request\'s steps); use "TIMESTAMPS" or "OFF"'] },
        TRACE_DEFAULTS,
        // tritonclient.http raises a 404 as its status text; gRPC as NOT_FOUND.
        { error: [protocol === 'http' ? '404' : missing, 'unknown model "nope"'] },
      ]);
    }, 60000);
  }

  test('REST: other methods are refused naming the allowed ones, a body that is no JSON object is a 400', async () => {
    const put = await request(`${live.server.url}/v2/logging`, { method: 'PUT', body: '{}' });
    expect([put.status, put.json.error, put.headers.allow]).toEqual([405, 'PUT /v2/logging: use GET or POST', 'GET, HEAD, POST']);
    const list = await request(`${live.server.url}/v2/trace/setting`, { body: '[1]' });
    expect([list.status, list.json.error]).toEqual([400, 'the request body must be a JSON object']);
    const unknown = await request(`${live.server.url}/v2/logging`, { body: '{"log_colour":true}' });
    expect([unknown.status, unknown.json.error]).toEqual([400, 'unknown log setting "log_colour" (the settings: log_file, log_info, log_warning, log_error, log_verbose_level, log_format)']);
  });
});

describe('what the log settings do', () => {
  test('levels, verbose request lines, the ISO8601 format and a log file', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-logging-'));
    const { repo } = makeRepository();
    const server = await listenInProcess([repo, '--model-control', 'explicit']);
    const lines = () => server.stderr().trim().split('\n');
    const set = async (settings) => {
      const r = await request(`${server.url}/v2/logging`, { body: JSON.stringify(settings) });
      expect(r.status).toBe(200);
      return r.json;
    };
    const load = (name) => request(`${server.url}/v2/repository/models/${name}/load`, { body: '' });
    const infer = () => request(`${server.url}/v2/models/add/infer`, { body: addBody });
    try {
      const before = lines().length;
      // Verbose 0 (the default): requests are not logged; info lines are.
      await infer();
      await load('add');
      expect(lines().slice(before)).toEqual(['zgc-runtime serve: model "add" loaded by request']);
      // Info off: a load says nothing; verbose 1: each request answered is a line, in ISO8601.
      await set({ log_info: false, log_verbose_level: 1, log_format: 'ISO8601' });
      const mark = lines().length;
      await load('add');
      await infer();
      expect(lines().slice(mark)).toEqual([expect.stringMatching(/^zgc-runtime serve: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z V infer "add" version 2 \(rest\): success in \d+\.\d{3} ms$/)]);
      // A log file: lines go there instead, appended.
      const file = path.join(dir, 'serve.log');
      fs.writeFileSync(file, 'earlier\n');
      expect(await set({ log_file: file, log_format: 'default' })).toMatchObject({ log_file: file });
      const quiet = lines().length;
      await infer();
      expect(fs.readFileSync(file, 'utf8')).toMatch(/^earlier\ninfer "add" version 2 \(rest\): success in \d+\.\d{3} ms\n$/);
      expect(lines()).toHaveLength(quiet);
      // One that cannot be opened is refused, and the file in use stays.
      const refused = await request(`${server.url}/v2/logging`, { body: JSON.stringify({ log_file: path.join(dir, 'no', 'such', 'dir.log') }) });
      expect([refused.status, refused.json.error]).toEqual([400, expect.stringMatching(/^log setting "log_file": cannot open ".*dir\.log" to append to it: ENOENT$/)]);
      expect((await set({})).log_file).toBe(file);
      // Back to the server's own log; errors are lines of their own level.
      await set({ log_file: '', log_verbose_level: 0, log_info: true });
      fs.rmSync(path.join(repo, 'add', '1', 'model.so'));
      fs.rmSync(path.join(repo, 'add', '2', 'model.so'));
      const errorsOn = lines().length;
      expect((await load('add')).status).toBe(400);
      expect(lines().slice(errorsOn)).toEqual([expect.stringMatching(/^zgc-runtime serve: failed to load model "add" by request: /)]);
      await set({ log_error: false });
      const errorsOff = lines().length;
      expect((await load('add')).status).toBe(400);
      expect(lines()).toHaveLength(errorsOff);
    } finally {
      await server.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60000);

  test('--restricted-api logging and trace ask for their header', async () => {
    const { repo } = makeRepository();
    const server = await listenInProcess([repo, '--restricted-api', 'logging,trace:admin-key=k']);
    try {
      for (const p of ['/v2/logging', '/v2/trace/setting', '/v2/models/add/trace/setting', '/v2/models/nope/trace/setting']) {
        expect((await request(`${server.url}${p}`, { method: 'GET' })).status).toBe(403);
        expect((await request(`${server.url}${p}`, { method: 'GET', headers: { 'admin-key': 'k' } })).status).toBe(p.includes('nope') ? 404 : 200);
      }
    } finally {
      await server.stop();
    }
  });
});

describe('what the trace settings do, with an OpenTelemetry SDK in this process', () => {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  beforeAll(() => api.trace.setGlobalTracerProvider(provider));
  afterAll(async () => {
    await provider.shutdown();
    api.trace.disable();
  });

  test('trace_level OFF traces none, trace_rate N the first of every N, trace_count N then none; a model setting wins over the server\'s', async () => {
    const { repo } = makeRepository();
    const server = await listenInProcess([repo]);
    const set = async (settings, model) => {
      const r = await request(`${server.url}/v2${model ? `/models/${model}` : ''}/trace/setting`, { body: JSON.stringify(settings) });
      expect(r.status).toBe(200);
    };
    // How many of `n` requests to `model` (add, or slow without its sleep) were traced.
    const traced = async (n, model = 'add') => {
      exporter.reset();
      for (let k = 1; k <= n; k++) {
        const inputs = model === 'add' ? [{ name: 'a', datatype: 'FP32', shape: [4], data: [k, 0, 0, 0] }, { name: 'b', datatype: 'FP32', shape: [4], data: [0, 0, 0, 0] }] : [{ name: 'x', datatype: 'FP32', shape: [4], data: [k, 0, 0, 0] }];
        const body = JSON.stringify({ id: String(k), inputs });
        expect((await request(`${server.url}/v2/models/${model}/infer`, { body })).status).toBe(200);
      }
      return exporter.getFinishedSpans().filter((s) => s.name === `infer ${model}`).length;
    };
    try {
      expect(await traced(3)).toBe(3);
      await set({ trace_level: ['OFF'] });
      expect(await traced(3)).toBe(0);
      await set({ trace_level: ['TIMESTAMPS'], trace_rate: '3' });
      expect(await traced(7)).toBe(3);
      await set({ trace_rate: '1', trace_count: '2' });
      expect(await traced(5)).toBe(2);
      expect(await traced(2)).toBe(0);
      // A model's own count starts afresh; other models keep the server's (spent) one.
      await set({ trace_count: '1' }, 'add');
      expect(await traced(3)).toBe(1);
      expect(await traced(2, 'slow')).toBe(0);
      await set({ trace_count: null }, 'add');
      await set({ trace_count: '-1' });
      expect(await traced(2)).toBe(2);
    } finally {
      await server.stop();
    }
  }, 60000);
});
