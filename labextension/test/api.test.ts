// Each endpoint's function: the request it sends (docs/rest-api.yml) and what it makes of the reply.
import { ServerConnection } from '@jupyterlab/services';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  CheckpointAPIError,
  checkpointDetails,
  deleteCheckpoint,
  events,
  listCheckpoints,
  replay,
  restoreCheckpoint,
  resumeOffer,
  saveCheckpoint,
  sessions,
  tagCheckpoint
} from '../src/api';

/** Answer the next request with ``body`` and ``status``; what the spy records is what was sent. */
function serve(body: unknown, status = 200) {
  return vi
    .spyOn(ServerConnection, 'makeRequest')
    .mockImplementation(async () => new Response(body === undefined ? null : JSON.stringify(body), { status }));
}

afterEach(() => {
  vi.restoreAllMocks();
});

interface IEndpointCase {
  call: () => Promise<unknown>;
  reply: unknown;
  status?: number;
  /** What the call resolves to. */
  result: unknown;
  /** The URL, method and JSON body it sends. */
  request: [string, string, unknown];
}

const timeline = { session: '/n/a b.ipynb', checkpoints: [], rows: [], remote: null, store: null };
const restored = { checkpoint: 3, summary: 'restored checkpoint 3', replayable: '', replay_cells: [] };
const noEvents = { events: [], restoring: [] };

const endpoints: IEndpointCase[] = [
  { call: () => sessions(), reply: { sessions: [] }, result: [], request: ['/api/ckpt/sessions', 'GET', undefined] },
  {
    call: () => listCheckpoints('a b.ipynb'),
    reply: timeline,
    result: timeline,
    request: ['/api/ckpt/checkpoints?session=a+b.ipynb', 'GET', undefined]
  },
  {
    call: () => saveCheckpoint('a.ipynb', 'k1'),
    reply: { id: 8 },
    status: 201,
    result: { id: 8 },
    request: ['/api/ckpt/checkpoints', 'POST', { session: 'a.ipynb', kernel_id: 'k1' }]
  },
  { call: () => checkpointDetails(7), reply: { id: 7 }, result: { id: 7 }, request: ['/api/ckpt/checkpoints/7', 'GET', undefined] },
  {
    call: () => tagCheckpoint(7, null),
    reply: { id: 7 },
    result: { id: 7 },
    request: ['/api/ckpt/checkpoints/7', 'PATCH', { tag: null }]
  },
  {
    call: () => deleteCheckpoint(7),
    reply: undefined,
    status: 204,
    result: undefined,
    request: ['/api/ckpt/checkpoints/7', 'DELETE', undefined]
  },
  {
    call: () => restoreCheckpoint(3, 'k1'),
    reply: restored,
    result: restored,
    request: ['/api/ckpt/checkpoints/3/restore', 'POST', { kernel_id: 'k1' }]
  },
  {
    call: () => replay('k1'),
    reply: { variables: { conn: 'replayed' } },
    result: { conn: 'replayed' },
    request: ['/api/ckpt/replay', 'POST', { kernel_id: 'k1' }]
  },
  {
    call: () => events(1.5, 'a.ipynb'),
    reply: noEvents,
    result: noEvents,
    request: ['/api/ckpt/events?session=a.ipynb&since=1.5', 'GET', undefined]
  },
  { call: () => events(0), reply: noEvents, result: noEvents, request: ['/api/ckpt/events?since=0', 'GET', undefined] },
  {
    call: () => resumeOffer('k&1'),
    reply: { offer: null },
    result: null,
    request: ['/api/ckpt/offer?kernel_id=k%261', 'GET', undefined]
  }
];

describe('every endpoint', () => {
  it.each(endpoints)('$request.1 $request.0', async ({ call, reply, status, result, request }) => {
    const spy = serve(reply, status);
    expect(await call()).toEqual(result);
    const [url, init] = spy.mock.calls[0];
    expect([url, init.method, init.body === undefined ? undefined : JSON.parse(init.body as string)]).toEqual(request);
  });

  it("fails with the HTTP status and the server's message", async () => {
    serve({ message: 'no checkpoint 999' }, 404);
    const failure = checkpointDetails(999);
    await expect(failure).rejects.toBeInstanceOf(CheckpointAPIError);
    await expect(failure).rejects.toMatchObject({ status: 404, message: 'no checkpoint 999' });
  });
});
