'use strict';

const { load, ZgcError } = require('../..');
const { fixture } = require('../helpers');

// status.c returns whatever status it is told to from run, copy_output and bind_source.
const NAMES = [
  'OK', 'INVALID_ARGUMENT', 'INVALID_RUNTIME_STORAGE', 'INVALID_SOURCE', 'INVALID_OUTPUT', 'SIZE_MISMATCH',
  'ALIGNMENT_MISMATCH', 'INCOMPATIBLE_BINDING', 'MISSING_BINDING', 'BUFFER_TOO_SMALL', 'OUT_OF_MEMORY',
];
const STATUSES = [...NAMES.keys()].slice(1).map((s) => [s, `ERR_ZGC_${NAMES[s]}`]).concat([[42, 'ERR_ZGC_UNKNOWN_STATUS'], [-1, 'ERR_ZGC_UNKNOWN_STATUS'], [127, 'ERR_ZGC_UNKNOWN_STATUS']]);

function ready() {
  const rt = load(fixture('status'));
  rt.set('run_status', 0);
  rt.set('copy_status', 0);
  rt.set('bind_status', 0);
  rt.set('buf', [1.5, 2]);
  return rt;
}

function caught(fn) {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error('expected a throw');
}

describe('every status an artifact returns becomes its own error code', () => {
  test.each(STATUSES)('status %i from zgc_runtime_run is %s', (status, code) => {
    const rt = ready();
    const err = caught(() => rt.run({ run_status: status }));
    expect(err).toBeInstanceOf(ZgcError);
    expect(err).toMatchObject({ code, status, operation: 'zgc_runtime_run' });
    expect(err.message).toContain(`(status ${status})`);
    // The runtime is still usable: clear the status and run.
    expect(rt.run({ run_status: 0 })[0].data[0]).toBe(3.5);
    rt.close();
  });

  test.each(STATUSES)('status %i from zgc_runtime_copy_output is %s', (status, code) => {
    const rt = ready();
    rt.set('copy_status', status);
    const err = caught(() => rt.run());
    expect(err).toMatchObject({ code, status, operation: 'zgc_runtime_copy_output' });
    expect(err.message).toMatch(/for output 0$/);
    rt.set('copy_status', 0);
    expect(rt.output(0).data[0]).toBe(3.5);
    rt.close();
  });

  test.each(STATUSES)('status %i from zgc_runtime_bind_source is %s, and the earlier binding stays', (status, code) => {
    const rt = ready();
    rt.set('bind_status', status);
    const err = caught(() => rt.bind('buf', new Float32Array([100, 200])));
    expect(err).toMatchObject({ code, status, operation: 'zgc_runtime_bind_source', source: 'buf' });
    expect(caught(() => rt.set('buf', [7, 8]))).toMatchObject({ code, operation: 'zgc_runtime_bind_source' });
    rt.set('bind_status', 0);
    expect(rt.run()[0].data[0]).toBe(3.5);
    rt.close();
  });
});
