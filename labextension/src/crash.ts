// Tells the user when the server restored a crashed kernel, and to which kernel checkpoint.
import { Notification } from '@jupyterlab/apputils';
import { PathExt } from '@jupyterlab/coreutils';
import { type ICheckpoint, type ICrashEvent, listCheckpoints, requestAPI, sessionQuery } from './api';
import { label, numbers } from './format';
import { offerReplay } from './replay';

export class CrashWatcher {
  private _start = Date.now() / 1000;
  /** Per session, the time of the newest event already shown. */
  private _since = new Map<string, number>();
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

  private _schedule(): void {
    this._timer = window.setTimeout(async () => {
      await Promise.all(this._sessions().map(s => this._check(s)));
      this._schedule();
    }, this._pollMs);
  }

  private async _check(session: string): Promise<void> {
    const since = this._since.get(session) ?? this._start;
    let events: ICrashEvent[];
    try {
      events = (await requestAPI<{ events: ICrashEvent[] }>(`events${sessionQuery(session)}&since=${since}`)).events;
    } catch {
      return; // the next round asks again
    }
    const fresh = events.filter(e => e.time > since);
    if (!fresh.length) {
      return;
    }
    const name = await labeller(session);
    for (const e of fresh) {
      this._since.set(session, Math.max(this._since.get(session) ?? since, e.time));
      notify(e, name);
    }
  }
}

/** Names checkpoints by their number in the session, as the sidebar does (ids when the list cannot be read). */
async function labeller(session: string): Promise<(id: number) => string> {
  let records: ICheckpoint[] = [];
  try {
    records = (await listCheckpoints(session)).checkpoints;
  } catch {
    // the ids then
  }
  const numbered = numbers(records);
  return id => label(numbered, id);
}

function notify(e: ICrashEvent, name: (id: number) => string): void {
  const options = { autoClose: false as const };
  const notebook = PathExt.basename(e.session);
  if (e.type === 'crash-restore') {
    Notification.success(
      `The kernel of ${notebook} crashed and was restored to kernel checkpoint ${name(e.checkpoint ?? 0)}. ${e.message}`,
      options
    );
    offerReplay(e.kernel_id, e.replayable ?? '');
  } else {
    const tried = e.tried.map(name).join(', ');
    Notification.warning(
      `The kernel of ${notebook} crashed and was not restored${tried ? ` (tried ${tried})` : ''}. ${e.message}`,
      options
    );
  }
}
