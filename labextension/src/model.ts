// The timeline of the active notebook, polled from the server; the sidebar and the status bar draw it.
import type { DocumentWidget } from '@jupyterlab/docregistry';
import { KernelMessage } from '@jupyterlab/services';
import { type ISignal, Signal } from '@lumino/signaling';
import {
  CheckpointAPIError,
  type ICheckpoint,
  type IRemote,
  type IResumeOffer,
  type IRow,
  type IStoreUsage,
  listCheckpoints,
  resumeOffer
} from './api';
import { label, numbers } from './format';

/** How long after a cell finishes its automatic checkpoint is expected to land. */
const WRITE_WINDOW_MS = 10_000;

/** The data of the kernel's progress displays (jupyter_ckpt/progress.py PROGRESS_MIME). */
const PROGRESS_MIME = 'application/vnd.jupyter-ckpt.progress+json';

/** How far a save or restore is that the notebook's kernel runs, whoever asked for it (a cell, the sidebar). */
export interface IProgress {
  what: string;
  done: number;
  total: number;
}

export class TimelineModel {
  private _notebook: DocumentWidget | null = null;
  private _checkpoints: ICheckpoint[] = [];
  private _rows: IRow[] = [];
  private _remote: IRemote | null = null;
  private _store: IStoreUsage | null = null;
  private _offer: IResumeOffer | null = null;
  private _offerFor: string | null = null; // the kernel whose offer was asked for
  private _offerAt = 0; // when, in seconds since the epoch
  private _numbers = new Map<number, number>();
  private _progress: IProgress | null = null;
  private _error = '';
  private _cellDone: { at: number; count: number } | null = null;
  private _timer = 0;
  private _pollMs = 2000;
  private _changed = new Signal<this, void>(this);

  /** Emitted after every refresh and whenever the notebook changes. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get notebook(): DocumentWidget | null {
    return this._notebook;
  }

  /** The session key: the notebook's path relative to the server root. */
  get session(): string | null {
    return this._notebook?.context.path ?? null;
  }

  get kernelId(): string | null {
    return this._notebook?.context.sessionContext.session?.kernel?.id ?? null;
  }

  /** Oldest first. */
  get checkpoints(): ICheckpoint[] {
    return this._checkpoints;
  }

  /** The same checkpoints in timeline order, as the server lays them out: each branch after the line it left. */
  get rows(): IRow[] {
    return this._rows;
  }

  /** The object store the checkpoints are uploaded to, and how far it is behind; null without one. */
  get remote(): IRemote | null {
    return this._remote;
  }

  /** What the kernel offers to resume (asked once per kernel, and again after a restart), until it restores. */
  get offer(): IResumeOffer | null {
    return this._offer;
  }

  /** The offer was taken or dismissed: not shown again for this kernel. */
  dropOffer(): void {
    this._offer = null;
    this._changed.emit();
  }

  /** The store's size against its budget, as of the last refresh. */
  get store(): IStoreUsage | null {
    return this._store;
  }

  /** A checkpoint's number in this notebook (``#N``), or its id in parentheses when it is not listed. */
  label(id: number): string {
    return label(this._numbers, id);
  }

  /** The kernel's last save or restore that showed its progress (it took over a second), if any. */
  get progress(): IProgress | null {
    return this._progress;
  }

  get error(): string {
    return this._error;
  }

  /**
   * Whether the checkpoint of a cell that just finished is still being written:
   * the session checkpoints after cells, a cell finished since the newest
   * checkpoint, and its checkpoint has not landed yet.
   */
  get writing(): boolean {
    const done = this._cellDone;
    const last = this._checkpoints[this._checkpoints.length - 1];
    return (
      done !== null &&
      last?.trigger === 'cell' &&
      this._checkpoints.length === done.count &&
      Date.now() - done.at < WRITE_WINDOW_MS
    );
  }

  set pollInterval(seconds: number) {
    this._pollMs = Math.max(0.5, seconds) * 1000;
    this._schedule(this._pollMs);
  }

  setNotebook(widget: DocumentWidget | null): void {
    if (widget === this._notebook) {
      return;
    }
    this._notebook?.context.sessionContext.iopubMessage.disconnect(this._onIOPub, this);
    this._notebook?.context.sessionContext.statusChanged.disconnect(this._onStatus, this);
    this._notebook = widget;
    this._checkpoints = [];
    this._rows = [];
    this._remote = null;
    this._store = null;
    this._offer = null;
    this._offerFor = null;
    this._numbers = new Map();
    this._progress = null;
    this._error = '';
    this._cellDone = null;
    widget?.context.sessionContext.iopubMessage.connect(this._onIOPub, this);
    widget?.context.sessionContext.statusChanged.connect(this._onStatus, this);
    this._changed.emit();
    this._schedule(0);
  }

  async refresh(): Promise<void> {
    const session = this.session;
    if (session === null) {
      return;
    }
    let checkpoints: ICheckpoint[] = [];
    let rows: IRow[] = [];
    let remote: IRemote | null = null;
    let store: IStoreUsage | null = null;
    let error = '';
    try {
      ({ checkpoints, rows, remote, store } = await listCheckpoints(session));
    } catch (e) {
      // 404: the session has no checkpoints yet, which is not an error.
      if (!(e instanceof CheckpointAPIError && e.status === 404)) {
        error = (e as Error).message;
      }
    }
    if (session !== this.session) {
      return; // the user switched notebooks while this request was out
    }
    await this._askOffer();
    if (checkpoints.some(c => c.trigger.endsWith('restore') && c.time > this._offerAt)) {
      this._offer = null; // the kernel restored something since it was asked (a cell, the timeline): offer taken
    }
    this._checkpoints = checkpoints;
    this._rows = rows;
    this._remote = remote;
    this._store = store;
    this._numbers = numbers(rows);
    this._error = error;
    this._changed.emit();
  }

  dispose(): void {
    window.clearTimeout(this._timer);
    this.setNotebook(null);
  }

  /** Ask a kernel once what it offers to resume (a kernel busy with a cell is asked at the next refresh). */
  private async _askOffer(): Promise<void> {
    const kernelId = this.kernelId;
    if (kernelId === null || kernelId === this._offerFor) {
      return;
    }
    try {
      this._offerAt = Date.now() / 1000;
      this._offer = await resumeOffer(kernelId);
      this._offerFor = kernelId;
    } catch {
      this._offer = null; // busy, starting, or without the extension yet: asked again at the next refresh
    }
  }

  /** A restarted kernel keeps its id: ask it again what it offers. */
  private _onStatus(_: unknown, status: string): void {
    if (status === 'restarting' || status === 'starting') {
      this._offer = null;
      this._offerFor = null;
    }
  }

  private _schedule(delay: number): void {
    window.clearTimeout(this._timer);
    this._timer = window.setTimeout(async () => {
      await this.refresh();
      this._schedule(this._pollMs);
    }, delay);
  }

  /**
   * A cell run from this page finished (the kernel went idle after its execute request), or a save or restore
   * told its progress (in a display that any request of the kernel's can send: iopub is for every client).
   */
  private _onIOPub(_: unknown, msg: KernelMessage.IMessage): void {
    const parent = msg.parent_header as Partial<KernelMessage.IHeader>;
    const ours = parent.session === this._notebook?.context.sessionContext.session?.kernel?.clientId;
    if (KernelMessage.isDisplayDataMsg(msg) || KernelMessage.isUpdateDisplayDataMsg(msg)) {
      const progress = msg.content.data[PROGRESS_MIME] as unknown as IProgress | undefined;
      if (progress !== undefined) {
        this._progress = progress;
        this._changed.emit();
      }
      return;
    }
    const idle = KernelMessage.isStatusMsg(msg) && msg.content.execution_state === 'idle';
    const progress = this._progress;
    if (idle && progress !== null && progress.done < progress.total) {
      this._progress = null; // the save or restore stopped short (it failed): the kernel has moved on
      this._changed.emit();
    }
    if (idle && parent.msg_type === 'execute_request' && ours) {
      this._cellDone = { at: Date.now(), count: this._checkpoints.length };
      this._changed.emit();
    }
  }
}
