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

export interface ITimeline {
  checkpoints: ICheckpoint[];
  remote: IRemote | null;
  store: IStoreUsage | null;
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
 * Call /api/ckpt/<endpoint> with the server's token and XSRF handling.
 * Resolves to the parsed JSON body (undefined for 204); throws CheckpointAPIError otherwise.
 */
export async function requestAPI<T>(endpoint: string, init: RequestInit = {}): Promise<T> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, 'api/ckpt', endpoint);
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new CheckpointAPIError(0, `the server cannot be reached: ${error}`);
  }
  const text = await response.text();
  let body: { message?: string } | undefined;
  if (text) {
    try {
      body = JSON.parse(text);
    } catch {
      body = { message: text };
    }
  }
  if (!response.ok) {
    throw new CheckpointAPIError(response.status, body?.message || response.statusText);
  }
  return body as T;
}

export function sessionQuery(session: string): string {
  return `?session=${encodeURIComponent(session)}`;
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

/** The kernel's offer to resume, or null (none, or the kernel has restored something already). */
export async function resumeOffer(kernelId: string): Promise<IResumeOffer | null> {
  const reply = await requestAPI<{ offer: IResumeOffer | null }>(`offer?kernel_id=${encodeURIComponent(kernelId)}`);
  return reply.offer;
}

/** A session's checkpoints, oldest first; throws CheckpointAPIError (404 when it has none yet). */
export async function listCheckpoints(session: string): Promise<ITimeline> {
  const reply = await requestAPI<{ checkpoints: ICheckpoint[]; remote?: IRemote | null; store?: IStoreUsage }>(
    `checkpoints${sessionQuery(session)}`
  );
  return { checkpoints: reply.checkpoints, remote: reply.remote ?? null, store: reply.store ?? null };
}
