'use strict';

// The command line of `npx zgc-runtime`, read in process (lib/cli-args.js): every option
// and every refusal. cli/cli.spec.js runs the commands themselves in a child process.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { load } = require('../..');
const { formatNpy } = require('../../lib/npy');
const { SIZE_RULE } = require('../../lib/options');
const { UsageError, parseArgs, parseServeArgs, readInput } = require('../../lib/cli-args');
const { fixture } = require('../helpers');

function usage(fn) {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    return err.message;
  }
  throw new Error('expected a usage error');
}

describe('inspect, run, bench and build-from-source', () => {
  test('help, in each spelling, and no command at all', () => {
    for (const argv of [[], ['--help'], ['-h'], ['help'], ['help', 'run']]) expect(parseArgs(argv)).toEqual({ command: 'help' });
    // --help anywhere on the line, not only alone.
    expect(parseArgs(['run', 'a.so', '--input', 'x=1', '--help'])).toEqual({ command: 'help' });
  });

  test('the version, in each spelling; an unknown command gets the nearest one', () => {
    for (const argv of [['--version'], ['-v'], ['version']]) expect(parseArgs(argv)).toEqual({ command: 'version' });
    expect(usage(() => parseArgs(['inpect', 'a.so']))).toBe('unknown command "inpect" (did you mean "inspect"?) (inspect, run, bench, serve, build-from-source)');
    expect(usage(() => parseArgs(['sevre']))).toBe('unknown command "sevre" (did you mean "serve"?) (inspect, run, bench, serve, build-from-source)');
    expect(usage(() => parseArgs(['xyzzy', 'a.so']))).toBe('unknown command "xyzzy" (inspect, run, bench, serve, build-from-source)');
  });

  test('each command with its defaults and each of its options', () => {
    const defaults = { inputs: [], json: false, progress: false };
    expect(parseArgs(['inspect', 'a.so'])).toEqual({ command: 'inspect', artifact: 'a.so', ...defaults });
    expect(parseArgs(['inspect', 'a.so', '--json'])).toEqual({ command: 'inspect', artifact: 'a.so', ...defaults, json: true });
    expect(parseArgs(['run', 'a.so', '--input', 'x=1', '--input=y=2,3', '--save', 'out', '--json'])).toEqual({
      command: 'run',
      artifact: 'a.so',
      ...defaults,
      inputs: ['x=1', 'y=2,3'],
      save: 'out',
      json: true,
    });
    expect(parseArgs(['run', 'a.so', '--save=d=e'])).toEqual({ command: 'run', artifact: 'a.so', ...defaults, save: 'd=e' });
    expect(parseArgs(['bench', 'a.so', '--runs', '10', '--seconds=0.5', '--progress'])).toEqual({
      command: 'bench',
      artifact: 'a.so',
      ...defaults,
      runs: 10,
      seconds: 0.5,
      progress: true,
    });
    expect(parseArgs(['build-from-source'])).toEqual({ command: 'build-from-source', force: false });
    expect(parseArgs(['build-from-source', '--force'])).toEqual({ command: 'build-from-source', force: true });
  });

  test.each([
    [['frob', 'a.so'], 'unknown command "frob" (inspect, run, bench, serve, build-from-source)'],
    [['inspect'], 'inspect needs an artifact path'],
    [['run', '--json'], 'run needs an artifact path'],
    [['inspect', 'a.so', '--save', 'x'], 'inspect does not take "--save" (it takes --json)'],
    [['bench', 'a.so', '--json'], 'bench does not take "--json" (it takes --runs, --seconds, --progress)'],
    [['run', 'a.so', '-j'], 'run does not take "-j" (it takes --input, --save, --json)'],
    [['run', 'a.so', 'extra'], 'run does not take "extra" (it takes --input, --save, --json)'],
    [['run', 'a.so', 'x=1'], 'run does not take "x=1" (it takes --input, --save, --json)'],
    [['bench', 'a.so', '-r=2'], 'bench does not take "-r=2" (it takes --runs, --seconds, --progress)'],
    [['run', 'a.so', '--input'], '--input needs a value'],
    [['bench', 'a.so', '--seconds'], '--seconds needs a value'],
    [['inspect', 'a.so', '--json=false'], '--json takes no value, got "--json=false"'],
    [['bench', 'a.so', '--progress=1'], '--progress takes no value, got "--progress=1"'],
    [['bench', 'a.so', '--runs', '1.5'], '--runs must be a positive integer, got "1.5"'],
    [['bench', 'a.so', '--runs', '0'], '--runs must be a positive integer, got "0"'],
    [['bench', 'a.so', '--runs=ten'], '--runs must be a positive integer, got "ten"'],
    [['bench', 'a.so', '--seconds', '-1'], '--seconds must be a positive number, got "-1"'],
    [['bench', 'a.so', '--seconds', '0'], '--seconds must be a positive number, got "0"'],
    [['build-from-source', 'now'], 'build-from-source does not take "now" (it takes --force)'],
    [['build-from-source', '--force', '--quick'], 'build-from-source does not take "--quick" (it takes --force)'],
  ])('%j is refused', (argv, message) => {
    expect(usage(() => parseArgs(argv))).toBe(message);
  });
});

describe('serve', () => {
  test('models in order, the defaults, and every flag in both spellings', () => {
    expect(parseArgs(['serve', 'repo'])).toEqual({ command: 'serve', models: ['repo'], port: 8000, host: '127.0.0.1' });
    expect(
      parseServeArgs([
        'a=x.so', '--port', '0', 'repo', '--host=0.0.0.0', '--pool-size', '3', '--max-queue=0', '--timeout-ms', '0',
        '--max-body', '100', '--poll-ms=250', '--shutdown-timeout-ms', '5000', '--isolate', 'process',
      ]),
    ).toEqual({
      command: 'serve',
      models: ['a=x.so', 'repo'],
      port: 0,
      host: '0.0.0.0',
      poolSize: 3,
      maxQueue: 0,
      timeoutMs: 0,
      maxBody: 100,
      pollMs: 250,
      shutdownTimeoutMs: 5000,
      isolate: 'process',
    });
    expect(parseServeArgs(['m', '--port', '65535']).port).toBe(65535);
    // A switch: present or not.
    expect(parseServeArgs(['m', '--allow-client-shm']).allowClientShm).toBe(true);
    expect(parseServeArgs(['m']).allowClientShm).toBeUndefined();
  });

  test('--max-body takes k, m and g suffixes, in either case', () => {
    const body = (v) => parseServeArgs(['m', '--max-body', v]).maxBody;
    expect([body('2k'), body('2K'), body('64m'), body('1g'), body('1G'), body('7'), body('0.5k')]).toEqual([2048, 2048, 64 * 1024 ** 2, 1024 ** 3, 1024 ** 3, 7, 512]);
    // The units createServer's maxBody takes too (lib/options.js).
    expect([body('64MB'), body('64mib'), body('1.5g'), body('512 kb')]).toEqual([64 * 1024 ** 2, 64 * 1024 ** 2, 1.5 * 1024 ** 3, 512 * 1024]);
  });

  test('every server limit and model control as a flag, in both spellings', () => {
    expect(
      parseServeArgs([
        'm', '--max-inflight-bytes', '1g', '--headers-timeout-ms=2000', '--request-timeout-ms', '0', '--keep-alive-timeout-ms', '100',
        '--max-connections', '50', '--parse-timeout-ms', '300', '--grpc-max-concurrent-streams=8', '--grpc-handshake-timeout-ms', '500',
        '--grpc-idle-timeout-ms', '0', '--model-control', 'explicit', '--config', 'server.json',
        '--restricted-api', 'model-repository:admin-key=s3cret', '--restricted-api=inference,metrics:x-infer=a=b',
      ]),
    ).toEqual({
      command: 'serve',
      models: ['m'],
      port: 8000,
      host: '127.0.0.1',
      maxInflightBytes: 1024 ** 3,
      headersTimeoutMs: 2000,
      requestTimeoutMs: 0,
      keepAliveTimeoutMs: 100,
      maxConnections: 50,
      parseTimeoutMs: 300,
      grpcMaxConcurrentStreams: 8,
      grpcHandshakeTimeoutMs: 500,
      grpcIdleTimeoutMs: 0,
      modelControl: 'explicit',
      config: 'server.json',
      restrictedApi: ['model-repository:admin-key=s3cret', 'inference,metrics:x-infer=a=b'],
    });
  });

  const integer = (min) => `an integer >= ${min}`;
  test.each([
    [['--model-control', 'auto'], '--model-control must be none, poll, explicit, got "auto"'],
    [['--restricted-api', 'inference'], '--restricted-api must be CATEGORY[,CATEGORY...]:HEADER=VALUE, categories from health, metadata, inference, model-config, model-repository, metrics, statistics, shared-memory, logging, trace; got "inference"'],
    [['--restricted-api', 'tracing:k=v'], '--restricted-api: unknown category "tracing" (categories: health, metadata, inference, model-config, model-repository, metrics, statistics, shared-memory, logging, trace)'],
    [['--restricted-api', 'health,health:k=v'], '--restricted-api: category health is restricted twice'],
    [['--restricted-api', 'health:a b=v'], '--restricted-api must be CATEGORY[,CATEGORY...]:HEADER=VALUE, categories from health, metadata, inference, model-config, model-repository, metrics, statistics, shared-memory, logging, trace; got "health:a b=v"'],
    [['--headers-timeout-ms', '0'], `--headers-timeout-ms must be ${integer(1)}, got "0"`],
    [['--max-connections', '1.5'], `--max-connections must be ${integer(1)}, got "1.5"`],
    [['--max-connections', ''], `--max-connections must be ${integer(1)}, got ""`],
    [['--request-timeout-ms', '-1'], `--request-timeout-ms must be ${integer(0)}, got "-1"`],
    [['--grpc-idle-timeout-ms', '1e3'], `--grpc-idle-timeout-ms must be ${integer(0)}, got "1e3"`],
    [['--max-inflight-bytes', '0'], `--max-inflight-bytes must be ${SIZE_RULE}, at least 1 byte, got "0"`],
    [['--port', '65536'], '--port must be a port from 0 to 65535, got "65536"'],
    [['--port', '-1'], '--port must be a port from 0 to 65535, got "-1"'],
    [['--port', 'http'], '--port must be a port from 0 to 65535, got "http"'],
    [['--pool-size', '0'], `--pool-size must be ${integer(1)}, got "0"`],
    [['--max-queue', '-1'], `--max-queue must be ${integer(0)}, got "-1"`],
    [['--timeout-ms', '1.5'], `--timeout-ms must be ${integer(0)}, got "1.5"`],
    [['--poll-ms', ''], `--poll-ms must be ${integer(0)}, got ""`],
    [['--shutdown-timeout-ms', '1e400'], `--shutdown-timeout-ms must be ${integer(0)}, got "1e400"`],
    [['--isolate', 'thread'], '--isolate must be none or process, got "thread"'],
    [['--max-body', '0'], `--max-body must be ${SIZE_RULE}, at least 1 byte, got "0"`],
    [['--max-body', '5x'], `--max-body must be ${SIZE_RULE}, at least 1 byte, got "5x"`],
    [['--max-body', 'k'], `--max-body must be ${SIZE_RULE}, at least 1 byte, got "k"`],
    [['--max-body', '0.3k'], `--max-body must be ${SIZE_RULE}, at least 1 byte, got "0.3k"`],
    [['--poll-ms', ' '], `--poll-ms must be ${integer(0)}, got " "`],
    [['--max-body', '1.5'], `--max-body must be ${SIZE_RULE}, at least 1 byte, got "1.5"`],
    // Only --max-body takes a size suffix.
    [['--port', '8k'], '--port must be a port from 0 to 65535, got "8k"'],
    [['--pool-size=2k'], `--pool-size must be ${integer(1)}, got "2k"`],
    [['--timeout-ms', '1m'], `--timeout-ms must be ${integer(0)}, got "1m"`],
    [['--prot', '80'], 'serve does not take "--prot" (did you mean "--port"?) (it takes --port, --host, --pool-size, --max-queue, --timeout-ms, --poll-ms, --shutdown-timeout-ms, --isolate, --grpc-port, --model-control, --restricted-api, --config, --allow-client-shm, --max-body, --max-inflight-bytes, --headers-timeout-ms, --request-timeout-ms, --keep-alive-timeout-ms, --max-connections, --parse-timeout-ms, --grpc-max-concurrent-streams, --grpc-handshake-timeout-ms, --grpc-idle-timeout-ms)'],
    [['--maxbody=1m'], 'serve does not take "--maxbody=1m" (did you mean "--max-body"?) (it takes --port, --host, --pool-size, --max-queue, --timeout-ms, --poll-ms, --shutdown-timeout-ms, --isolate, --grpc-port, --model-control, --restricted-api, --config, --allow-client-shm, --max-body, --max-inflight-bytes, --headers-timeout-ms, --request-timeout-ms, --keep-alive-timeout-ms, --max-connections, --parse-timeout-ms, --grpc-max-concurrent-streams, --grpc-handshake-timeout-ms, --grpc-idle-timeout-ms)'],
    [['--verbose'], 'serve does not take "--verbose" (it takes --port, --host, --pool-size, --max-queue, --timeout-ms, --poll-ms, --shutdown-timeout-ms, --isolate, --grpc-port, --model-control, --restricted-api, --config, --allow-client-shm, --max-body, --max-inflight-bytes, --headers-timeout-ms, --request-timeout-ms, --keep-alive-timeout-ms, --max-connections, --parse-timeout-ms, --grpc-max-concurrent-streams, --grpc-handshake-timeout-ms, --grpc-idle-timeout-ms)'],
    [['--colour=red'], 'serve does not take "--colour=red" (it takes --port, --host, --pool-size, --max-queue, --timeout-ms, --poll-ms, --shutdown-timeout-ms, --isolate, --grpc-port, --model-control, --restricted-api, --config, --allow-client-shm, --max-body, --max-inflight-bytes, --headers-timeout-ms, --request-timeout-ms, --keep-alive-timeout-ms, --max-connections, --parse-timeout-ms, --grpc-max-concurrent-streams, --grpc-handshake-timeout-ms, --grpc-idle-timeout-ms)'],
    [['--port'], '--port needs a value'],
    [['--host'], '--host needs a value'],
    [['--allow-client-shm=yes'], '--allow-client-shm takes no value, got "yes"'],
  ])('%j is refused', (flags, message) => {
    expect(usage(() => parseServeArgs(['model.so', ...flags]))).toBe(message);
  });

  test('a serve with no model is refused', () => {
    const message = 'serve needs at least one model: a repository directory, name=artifact.so or artifact.so';
    expect(usage(() => parseArgs(['serve']))).toBe(message);
    expect(usage(() => parseServeArgs(['--port', '1']))).toBe(message);
  });
});

describe('--input values', () => {
  let rt;
  let tmp;
  beforeAll(() => {
    rt = load(fixture('dtypes'));
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-cli-args-'));
  });
  afterAll(() => {
    rt.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  test('comma lists of numbers, NaN and Infinity; true and false only for bool; one value for a scalar', () => {
    // x: f32 [2, 3]; q: i8 [5]; m: bool [5]; s: a f32 scalar.
    expect(readInput(rt, 'x=1, 2.5 ,-3,4e2,Infinity,-0')).toEqual(['x', [1, 2.5, -3, 400, Infinity, -0]]);
    const [, nans] = readInput(rt, 'q=nan,NaN,1,2,3');
    expect(nans).toEqual([NaN, NaN, 1, 2, 3]);
    expect(readInput(rt, 'm=true,false,1,0,true')).toEqual(['m', [true, false, 1, 0, true]]);
    expect(readInput(rt, 'm= true , false,0,0,0')).toEqual(['m', [true, false, 0, 0, 0]]);
    expect(readInput(rt, 's=2.5')).toEqual(['s', 2.5]);
    expect(readInput(rt, 'x=0x10,1,2,3,4,5')).toEqual(['x', [16, 1, 2, 3, 4, 5]]);
    expect(readInput(rt, 'wp=1,2,3,4,5,6')).toEqual(['wp', [1, 2, 3, 4, 5, 6]]);
  });

  test.each([
    ['s=1,2', '--input s: 2 values given, source "s" (f32 []) takes 1'],
    ['x=1,2,3', '--input x: 3 values given, source "x" (f32 [2, 3]) takes 6'],
    ['m=true', '--input m: 1 value given, source "m" (bool [5]) takes 5'],
    // wp is BOUND [2, 3] in 9 elements of padded storage: it takes 6 logical values.
    ['wp=1,2,3,4,5,6,7,8,9', '--input wp: 9 values given, source "wp" (f32 [2, 3]) takes 6'],
  ])('a list of the wrong length, %j, is a usage error naming the source, its shape and both counts', (spec, message) => {
    expect(usage(() => readInput(rt, spec))).toBe(message);
  });

  test("a float past its type's largest finite value is refused rather than taken as an infinity; inf is written so", () => {
    const six = (first) => `x=${first},1,2,3,4,5`;
    const beyond = (name, text, type, largest) => `--input ${name}: ${text} is beyond ${type}'s largest finite value (${largest}); write inf or -inf for an infinity`;
    expect(usage(() => readInput(rt, six('1e400')))).toBe(beyond('x', '1e400', 'f32', '3.4028234663852886e+38'));
    expect(usage(() => readInput(rt, six('-3.5e38')))).toBe(beyond('x', '-3.5e38', 'f32', '3.4028234663852886e+38'));
    // f32's largest finite value and the infinities, each way they are written.
    expect(readInput(rt, six('3.4028234663852886e38'))[1][0]).toBe(3.4028234663852886e38);
    expect(readInput(rt, 'x=inf,-inf,Infinity,-Infinity,+INF,nan')[1]).toEqual([Infinity, -Infinity, Infinity, -Infinity, Infinity, NaN]);
    // f16: 65519 rounds to 65504, its largest; 65520 is halfway to the next, and so infinity.
    expect(readInput(rt, 'h=65519,-65519,0,1')[1]).toEqual([65519, -65519, 0, 1]);
    expect(usage(() => readInput(rt, 'h=65520,0,0,0'))).toBe(beyond('h', '65520', 'f16', 65504));
    expect(usage(() => readInput(rt, 'h=0,-65520,0,0'))).toBe(beyond('h', '-65520', 'f16', 65504));
    expect(readInput(rt, 'h=-inf,inf,1,2')[1]).toEqual([-Infinity, Infinity, 1, 2]);
    // Only float sources: i8's own range check is the runtime's (values are not floats).
    expect(() => readInput(rt, 'q=1e400,1,2,3,4')).not.toThrow(/largest finite/);
    expect(usage(() => readInput(rt, 'x=infinite,1,2,3,4,5'))).toBe('--input x: "infinite" is not a number');
    expect(usage(() => readInput(rt, 'x=1inf,1,2,3,4,5'))).toBe('--input x: "1inf" is not a number');
  });

  test('run needs every INPUT source and every BOUND one; OWNED parameters may be left out', () => {
    const { checkInputsGiven } = require('../../lib/cli-args');
    expect(usage(() => checkInputsGiven(rt, { x: [], q: [] }))).toBe('run needs --input for every INPUT source; missing: h (input, f16 [4]), m (input, bool [5])');
    const inputs = { x: [], h: [], q: [], m: [] };
    expect(usage(() => checkInputsGiven(rt, { ...inputs, wt: [], wp: [], wn: [], hb: [] }))).toBe(
      'run needs values for every BOUND source, parameters too; missing: qb (parameter, i8 [2, 2]), mb (parameter, bool [3]). Give each with --input, as inputs are given: --input qb=qb.npy',
    );
    // s (state) and g (constant) are OWNED: the artifact holds them.
    expect(() => checkInputsGiven(rt, { ...inputs, wt: [], wp: [], wn: [], hb: [], qb: [], mb: [] })).not.toThrow();
  });

  test.each([
    ['x', '--input "x" must be name=file.npy or name=v1,v2,...'],
    ['=1,2', '--input "=1,2" must be name=file.npy or name=v1,v2,...'],
    ['nope=1', '--input nope: the artifact has no source named "nope" (its sources: x, h, q, m, wt, wp, wn, hb, qb, mb, s, k, g)'],
    ['x=1,,2', '--input x: "" is not a number'],
    ['x=1,abc', '--input x: "abc" is not a number'],
    ['q=true', '--input q: "true" is not a number'],
    ['x=', '--input x: "" is not a number'],
    ['x=1, ,2', '--input x: "" is not a number'],
  ])('%j is refused', (spec, message) => {
    expect(usage(() => readInput(rt, spec))).toBe(message);
  });

  test('a .npy file of the source dtype and shape gives its data; others are refused by what differs', () => {
    const file = (name, dtype, shape, data) => {
      const at = path.join(tmp, name);
      fs.writeFileSync(at, formatNpy(dtype, shape, data));
      return at;
    };
    const good = file('x.npy', 'f32', [2, 3], Float32Array.from([1, 2, 3, 4, 5, 6]));
    const [name, data] = readInput(rt, `x=${good}`);
    expect([name, data.constructor.name, Array.from(data)]).toEqual(['x', 'Float32Array', [1, 2, 3, 4, 5, 6]]);
    const bits = file('h.npy', 'f16', [4], Uint16Array.from([0x3c00, 0, 0x8000, 0x7c00]));
    expect(Array.from(readInput(rt, `h=${bits}`)[1])).toEqual([0x3c00, 0, 0x8000, 0x7c00]);
    const i8 = file('i8.npy', 'i8', [2, 3], new Int8Array(6));
    expect(usage(() => readInput(rt, `x=${i8}`))).toBe(`--input x: ${i8} holds i8, source "x" is f32`);
    const flat = file('flat.npy', 'f32', [6], new Float32Array(6));
    expect(usage(() => readInput(rt, `x=${flat}`))).toBe(`--input x: ${flat} has shape (6), source "x" has shape (2, 3)`);
    const turned = file('turned.npy', 'f32', [3, 2], new Float32Array(6));
    expect(usage(() => readInput(rt, `x=${turned}`))).toBe(`--input x: ${turned} has shape (3, 2), source "x" has shape (2, 3)`);
    const scalar = file('scalar.npy', 'f32', [], new Float32Array(1));
    expect(Array.from(readInput(rt, `s=${scalar}`)[1])).toEqual([0]);
    expect(usage(() => readInput(rt, `s=${flat}`))).toBe(`--input s: ${flat} has shape (6), source "s" has shape ()`);
    const missing = path.join(tmp, 'missing.npy');
    expect(usage(() => readInput(rt, `x=${missing}`))).toBe(`--input x: cannot read ${missing}: ENOENT`);
    expect(usage(() => readInput(rt, `x=${tmp}/.npy`))).toBe(`--input x: cannot read ${tmp}/.npy: ENOENT`);
    fs.mkdirSync(path.join(tmp, 'dir.npy'));
    expect(usage(() => readInput(rt, `x=${tmp}/dir.npy`))).toBe(`--input x: cannot read ${tmp}/dir.npy: EISDIR`);
  });
});
