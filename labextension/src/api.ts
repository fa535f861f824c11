// The REST API of the jupyter-ckpt server extension (/api/ckpt/...), typed.
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

export interface ICheckpoint {
  id: number;
  session: string;
  parent: number | null;
  time: number;
  cell: number | null;
  trigger: string;
  status: string;
  tag: string | null;
  message: string | null;
  new_bytes: number;
  total_bytes: number;
  changed: string[];
  /** Whether a kernel started here: the session's first checkpoint, or a restore a new kernel began with. */
  kernel_start: boolean;
}

/** A checkpoint as the timeline draws it: in timeline order, with its number and its place in the tree. */
export interface IRow extends ICheckpoint {
  /** Its number in the session, from 1 in id order: ``#N``. */
  number: number;
  /** Indent of the branch it is on. */
  depth: number;
  /** The checkpoint it branched from, when it starts a branch. */
  branch_from: number | null;
}

/** The object store checkpoints are uploaded to (``store_url``), as the server sees it. */
export interface IRemote {
  url: string;
  /** Checkpoints of this machine not uploaded yet, and their bytes. */
  behind: number;
  behind_bytes: number;
  /** Why the store cannot be reached now, if it cannot. */
  error: string | null;
}

/** The store's size against its retention budget, and its disk's free space against the floor always left. */
export interface IStoreUsage {
  size: number;
  budget: number;
  free: number;
  floor: number;
  /** What sets the budget: max_store_size, or max_store_share of the filesystem. */
  why: string;
}

/** A session in the store: a notebook's lineage of checkpoints. */
export interface ISession {
  /** The session key: the notebook's OS path. */
  key: string;
  /** The notebook's path relative to the server root; null when the key is not under it. */
  path: string | null;
  checkpoints: number;
  /** Time of the newest checkpoint, in seconds since the epoch. */
  last: number | null;
  bytes: number;
}

export interface ITimeline {
  /** The session key the name resolved to. */
  session: string;
  /** Oldest first. */
  checkpoints: ICheckpoint[];
  /** The same checkpoints in timeline order: each branch after the line it left. */
  rows: IRow[];
  remote: IRemote | null;
  store: IStoreUsage;
}

export interface IPreview {
  type: string;
  size: number;
  shape?: number[];
  dtype?: string;
  columns?: string[];
  length?: number;
  repr: string;
}

export interface ICheckpointDetails extends ICheckpoint {
  variables: { [name: string]: IPreview };
  modules: { [alias: string]: string };
  skipped: { [name: string]: { type: string; reason: string } };
  cells: { count: number | null; source: string; status: string }[];
  diff: {
    added: { [name: string]: IPreview };
    removed: { [name: string]: IPreview };
    changed: { [name: string]: { before: IPreview; after: IPreview } };
  };
}

/** A crash restore the server runs now, and how far it is (from the kernel's progress display, once shown). */
export interface IRestoring {
  session: string;
  kernel_id: string;
  what: string;
  done: number;
  total: number;
}

/** What a restore could not bring back that running recorded cells again would rebuild, and their code. */
export interface IReplayOffer {
  /** The variables and the cells' numbers ("conn (cells [2], [3])"); empty when there is nothing to replay. */
  replayable: string;
  /** The code replay would run, oldest first, from the signed history: shown before it runs. */
  replay_cells: { count: number | null; source: string }[];
}

/** What POST checkpoints/{id}/restore answers. */
export interface IRestoreResult extends IReplayOffer {
  checkpoint: number;
  summary: string;
}

export interface ICrashEvent extends IReplayOffer {
  type: 'crash-restore' | 'crash-restore-failed' | 'crash-restore-stopped';
  session: string;
  kernel_id: string;
  checkpoint: number | null;
  tried: number[];
  time: number;
  message: string;
}

/** What GET events answers: crash events, oldest first, and the crash restores running now. */
export interface IEvents {
  events: ICrashEvent[];
  restoring: IRestoring[];
}

/** What a new kernel offers to bring back: the last good state its notebook's earlier kernels left. */
export interface IResumeOffer {
  checkpoint: number;
  number: number;
  cell: number | null;
  time: number;
  variables: number;
  checkpoints: number;
}

/** A failed call: the HTTP status and the server's one-line message. */
export class CheckpointAPIError extends Error {
  constructor(
    readonly status: number,
    message: string
  ) {
    super(message);
    this.name = 'CheckpointAPIError';
  }
}

/**
 * Call /api/ckpt/<endpoint> with the server's token and XSRF handling, sending ``body`` as JSON.
 * Resolves to the parsed JSON body (undefined for 204); throws CheckpointAPIError otherwise.
 */
async function requestAPI<T>(endpoint: string, method = 'GET', body?: object): Promise<T> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, 'api/ckpt', endpoint);
  const init: RequestInit = body === undefined ? { method } : { method, body: JSON.stringify(body) };
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new CheckpointAPIError(0, `the server cannot be reached: ${error}`);
  }
  const text = await response.text();
  let reply: { message?: string } | undefined;
  if (text) {
    try {
      reply = JSON.parse(text);
    } catch {
      reply = { message: text };
    }
  }
  if (!response.ok) {
    throw new CheckpointAPIError(response.status, reply?.message || response.statusText);
  }
  return reply as T;
}

/** ``endpoint?name=value&…``, leaving out the parameters that are undefined. */
function query(endpoint: string, params: { [name: string]: string | number | undefined }): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined) {
      search.set(name, String(value));
    }
  }
  return `${endpoint}?${search}`;
}

/** Every session in the store, ordered by key. */
export async function sessions(): Promise<ISession[]> {
  return (await requestAPI<{ sessions: ISession[] }>('sessions')).sessions;
}

/** A session's checkpoints and their timeline rows; throws CheckpointAPIError (404 when it has none yet). */
export function listCheckpoints(session: string): Promise<ITimeline> {
  return requestAPI<ITimeline>(query('checkpoints', { session }));
}

/** Take a checkpoint in the session's live kernel now; resolves once it is durable. */
export function saveCheckpoint(session: string, kernelId: string): Promise<ICheckpoint> {
  return requestAPI<ICheckpoint>('checkpoints', 'POST', { session, kernel_id: kernelId });
}

/** One checkpoint in detail: its variables, the cells since its parent, the diff to its parent. */
export function checkpointDetails(id: number): Promise<ICheckpointDetails> {
  return requestAPI<ICheckpointDetails>(`checkpoints/${id}`);
}

/** Tag a checkpoint, or untag it (``tag`` null); the checkpoint as it is now. */
export function tagCheckpoint(id: number, tag: string | null): Promise<ICheckpoint> {
  return requestAPI<ICheckpoint>(`checkpoints/${id}`, 'PATCH', { tag });
}

export function deleteCheckpoint(id: number): Promise<void> {
  return requestAPI<void>(`checkpoints/${id}`, 'DELETE');
}

/** Restore a checkpoint into a live kernel; what it could not hold is replayed, or named, as the kernel's option says. */
export function restoreCheckpoint(id: number, kernelId: string): Promise<IRestoreResult> {
  return requestAPI<IRestoreResult>(`checkpoints/${id}/restore`, 'POST', { kernel_id: kernelId });
}

/** Rebuild what the kernel's last restore could not bring back by running its cells again: each variable's outcome. */
export async function replay(kernelId: string): Promise<{ [name: string]: string }> {
  return (await requestAPI<{ variables: { [name: string]: string } }>('replay', 'POST', { kernel_id: kernelId }))
    .variables;
}

/** The crash events after ``since`` (seconds since the epoch), of one session or all, and the restores running now. */
export function events(since: number, session?: string): Promise<IEvents> {
  return requestAPI<IEvents>(query('events', { session, since }));
}

/** The kernel's offer to resume, or null (none, or the kernel has restored something already). */
export async function resumeOffer(kernelId: string): Promise<IResumeOffer | null> {
  return (await requestAPI<{ offer: IResumeOffer | null }>(query('offer', { kernel_id: kernelId }))).offer;
}
