'use strict';

// The protocol's calls for operators through the client, over REST and gRPC, each against
// what serve's REST endpoints answer when asked by hand: health, metadata, repository index,
// load and unload (model control explicit), shared memory status, log and trace settings;
// model configuration and statistics over REST.
const { connect } = require('../../lib/client');
const { makeRepository, servedRepo } = require('../serve/setup');

const live = servedRepo(() => makeRepository().repo, ['--allow-client-shm', '--model-control', 'explicit']);
const rest = async (path, body) => {
  const res = await fetch(`${live.server.url}${path}`, body === undefined ? {} : { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  return res.status === 200 ? res.json() : { status: res.status };
};

describe.each([['REST', () => live.server.url], ['gRPC', () => `grpc://127.0.0.1:${live.grpcPort}`]])('operator calls over %s', (kind, address) => {
  let client;
  beforeAll(async () => {
    client = await connect(address(), { sharedMemory: 'auto' });
  });
  afterAll(() => client.close());

  test('health, metadata and the repository index answer as REST does', async () => {
    expect(await client.live()).toBe(true);
    expect(await client.ready()).toBe(true);
    expect([await client.modelReady('add'), await client.modelReady('add', 2), await client.modelReady('add', 9), await client.modelReady('nope')]).toEqual([true, true, false, false]);
    expect(await client.metadata()).toEqual(await rest('/v2'));
    expect(await client.modelMetadata('dtypes')).toEqual(expect.objectContaining({ name: 'dtypes', inputs: (await rest('/v2/models/dtypes')).inputs }));
    const index = await rest('/v2/repository/index', {});
    expect((await client.repositoryIndex()).map(({ name, version, state }) => ({ name, version, state }))).toEqual(index.map(({ name, version, state }) => ({ name, version, state })));
  });

  test('unload and load a model', async () => {
    await client.unloadModel('status');
    expect(await client.modelReady('status')).toBe(false);
    expect((await rest('/v2/repository/index', {})).find((m) => m.name === 'status').state).toBe('UNAVAILABLE');
    await client.loadModel('status');
    expect(await client.modelReady('status')).toBe(true);
    await expect(client.loadModel('nope')).rejects.toMatchObject({ code: expect.stringMatching(/^ERR_ZGC_REMOTE/) });
  });

  test("shared memory status lists this client's region as REST lists it", async () => {
    expect(client.sharedMemory).toBe(true);
    await (await client.model('add')).runAsync({ a: [1, 2, 3, 4], b: [1, 1, 1, 1] });
    const mine = (list) => list.filter((r) => r.name.startsWith(`zgc-client-${process.pid}-`));
    const listed = mine(await client.sharedMemoryStatus());
    expect(listed).toHaveLength(1);
    expect(listed).toEqual(mine(await rest('/v2/systemsharedmemory/status')).filter((r) => r.name === listed[0].name));
  });

  test('log and trace settings: read as REST reads them, changed, and back', async () => {
    expect(await client.logSettings()).toEqual(await rest('/v2/logging'));
    expect(await client.logSettings({ log_verbose_level: 1 })).toEqual({ ...(await rest('/v2/logging')), log_verbose_level: 1 });
    await client.logSettings({ log_verbose_level: 0 });
    expect(await client.traceSettings()).toEqual(await rest('/v2/trace/setting'));
    expect(await client.traceSettings('add', { trace_rate: '7' })).toEqual(await rest('/v2/models/add/trace/setting'));
    expect((await rest('/v2/models/add/trace/setting')).trace_rate).toBe('7');
    expect((await client.traceSettings('add', { trace_rate: null })).trace_rate).toBe((await rest('/v2/trace/setting')).trace_rate);
  });

  test('model configuration and statistics: as REST gives them, over both', async () => {
    for (const name of ['add', 'dtypes', 'slow', 'slowtimeout']) {
      expect([name, await client.modelConfig(name)]).toEqual([name, await rest(`/v2/models/${name}/config`)]);
    }
    const add = await client.model('add', { version: 1 });
    for (let i = 0; i < 3; i++) await add.runAsync({ a: [1, 2, 3, 4], b: [1, 1, 1, 1] });
    const mine = await client.statistics('add', 1);
    expect(mine).toEqual(await rest('/v2/models/add/versions/1/stats'));
    expect(mine.model_stats[0]).toMatchObject({ name: 'add', version: '1' });
    expect(mine.model_stats[0].inference_count).toBeGreaterThanOrEqual(3);
    expect(mine.model_stats[0].inference_stats.success.count).toBe(mine.model_stats[0].inference_count);
    expect((await client.statistics()).model_stats.map((m) => `${m.name}/${m.version}`)).toEqual((await rest('/v2/models/stats')).model_stats.map((m) => `${m.name}/${m.version}`));
  });
});
