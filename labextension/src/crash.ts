// Tells the user when the server restores a crashed kernel, how far it is, and to which kernel checkpoint.
import { Notification } from '@jupyterlab/apputils';
import { PathExt } from '@jupyterlab/coreutils';
import { events, type ICrashEvent, type IEvents, type IRow, listCheckpoints } from './api';
import { crashProgressLine, label, numbers } from './format';
import { offerReplay } from './replay';

/** How often to ask while a crash restore runs, so that its progress moves. */
const RESTORING_POLL_MS = 500;

export class CrashWatcher {
  private _start = Date.now() / 1000;
  /** Per session, the time of the newest event already shown. */
  private _since = new Map<string, number>();
  /** Per kernel, the notification of its crash restore in progress, which its event then turns to done. */
  private _inProgress = new Map<string, string>();
  private _timer = 0;
  private _pollMs = 2000;

  /** ``sessions`` says which notebooks are open now. */
  constructor(private _sessions: () => string[]) {
    this._schedule();
  }

  set pollInterval(seconds: number) {
    this._pollMs = Math.max(0.5, seconds) * 1000;
  }

  dispose(): void {
    window.clearTimeout(this._timer);
  }

  private _schedule(delay = this._pollMs): void {
    this._timer = window.setTimeout(async () => {
      await Promise.all(this._sessions().map(s => this._check(s)));
      this._schedule(this._inProgress.size ? Math.min(RESTORING_POLL_MS, this._pollMs) : this._pollMs);
    }, delay);
  }

  private async _check(session: string): Promise<void> {
    const since = this._since.get(session) ?? this._start;
    let reply: IEvents;
    try {
      reply = await events(since, session);
    } catch {
      return; // the next round asks again
    }
    for (const r of reply.restoring) {
      const message = crashProgressLine(PathExt.basename(r.session), r);
      const id = this._inProgress.get(r.kernel_id);
      if (id === undefined) {
        this._inProgress.set(r.kernel_id, Notification.emit(message, 'in-progress', { autoClose: false }));
      } else {
        Notification.update({ id, message });
      }
    }
    const fresh = reply.events.filter(e => e.time > since);
    if (!fresh.length) {
      return;
    }
    const name = await labeller(session);
    for (const e of fresh) {
      this._since.set(session, Math.max(this._since.get(session) ?? since, e.time));
      notify(e, name, this._inProgress.get(e.kernel_id));
      this._inProgress.delete(e.kernel_id);
    }
  }
}

/** Names checkpoints by their number in the session, as the sidebar does (ids when the list cannot be read). */
async function labeller(session: string): Promise<(id: number) => string> {
  let rows: IRow[] = [];
  try {
    rows = (await listCheckpoints(session)).rows;
  } catch {
    // the ids then
  }
  const numbered = numbers(rows);
  return id => label(numbered, id);
}

/** Shows a crash event: in the notification of its restore in progress (``id``) when there is one. */
function notify(e: ICrashEvent, name: (id: number) => string, id: string | undefined): void {
  const notebook = PathExt.basename(e.session);
  let message: string;
  let type: 'success' | 'warning';
  if (e.type === 'crash-restore') {
    message = `The kernel of ${notebook} crashed and was restored to kernel checkpoint ${name(e.checkpoint ?? 0)}. ${e.message}`;
    type = 'success';
  } else {
    const tried = e.tried.map(name).join(', ');
    message = `The kernel of ${notebook} crashed and was not restored${tried ? ` (tried ${tried})` : ''}. ${e.message}`;
    type = 'warning';
  }
  if (id === undefined) {
    Notification.emit(message, type, { autoClose: false });
  } else {
    Notification.update({ id, message, type, autoClose: false });
  }
  if (e.type === 'crash-restore') {
    offerReplay(e.kernel_id, e);
  }
}
