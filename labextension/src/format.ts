// How checkpoints read on screen, shared by the sidebar and the status bar.
import type { ICheckpoint, IPreview, IRemote, IResumeOffer, IRow, IStoreUsage } from './api';

/** What every label calls them: checkpoints of the kernel's state, not Jupyter's file checkpoints. */
export const NAME = 'Kernel checkpoints';

export function humanBytes(n: number | null | undefined): string {
  if (n === null || n === undefined || n < 0) {
    return '-';
  }
  let size = n;
  for (const unit of ['B', 'KiB', 'MiB']) {
    if (size < 1024) {
      return unit === 'B' ? `${size} B` : `${size.toFixed(1)} ${unit}`;
    }
    size /= 1024;
  }
  return `${size.toFixed(1)} GiB`;
}

export function clock(time: number): string {
  return new Date(time * 1000).toLocaleTimeString([], { hour12: false });
}

/** The store's size against its budget in a few words: `store: 96.5 MiB of 128.0 MiB (75%)`. */
export function storeLine(store: IStoreUsage | null): string {
  if (store === null) {
    return '';
  }
  const share = store.budget > 0 ? ` (${Math.round((100 * store.size) / store.budget)}%)` : '';
  return `store: ${humanBytes(store.size)} of ${humanBytes(store.budget)}${share}`;
}

/** The same, whole: what sets the budget and the free space left on the disk, for a tooltip. */
export function storeDetails(store: IStoreUsage): string {
  return (
    `${humanBytes(store.size)} of a ${humanBytes(store.budget)} budget (${store.why}); ` +
    `${humanBytes(store.free)} free on its disk, at least ${humanBytes(store.floor)} always left. ` +
    'Past the budget, old untagged checkpoints are thinned.'
  );
}

/** How far the remote store is behind, in a few words; empty when it holds everything and is reachable. */
export function remoteLine(remote: IRemote | null): string {
  if (remote === null) {
    return '';
  }
  if (remote.error) {
    return `${remote.url}: cannot be reached (${remote.error})`;
  }
  if (remote.behind === 0) {
    return '';
  }
  return `${remote.url}: ${remote.behind} not uploaded yet (${humanBytes(remote.behind_bytes)})`;
}

/** How long ago, as a person says it: 40 s, 12 min, 3.5 h, 2 days (as jupyter_ckpt/format.py's age). */
export function age(seconds: number): string {
  if (seconds < 60) {
    return `${Math.max(0, Math.round(seconds))} s`;
  }
  if (seconds < 3600) {
    return `${Math.round(seconds / 60)} min`;
  }
  if (seconds < 48 * 3600) {
    return `${(seconds / 3600).toFixed(1)} h`;
  }
  return `${Math.round(seconds / 86400)} days`;
}

/** "Resume where you left off: #12 after cell [9], 2.5 h ago, 7 variables". */
export function resumeLine(offer: IResumeOffer, now: number): string {
  const cell = offer.cell === null ? '' : ` after cell [${offer.cell}]`;
  const variables = offer.variables === 1 ? '1 variable' : `${offer.variables} variables`;
  return `Resume where you left off: #${offer.number}${cell}, ${age(now - offer.time)} ago, ${variables}`;
}

/** "restoring kernel checkpoint #3: 1.2 GiB of 4.0 GiB". */
export function progressLine(p: { what: string; done: number; total: number }): string {
  return `${p.what}: ${humanBytes(p.done)} of ${humanBytes(p.total)}`;
}

/** The crash notification while the server restores: "The kernel of a.ipynb crashed: restoring … 1.0 KiB of 2.0 KiB". */
export function crashProgressLine(notebook: string, p: { what: string; done: number; total: number }): string {
  return `The kernel of ${notebook} crashed: ${p.total > 0 ? progressLine(p) : `${p.what}…`}`;
}

/** The status bar's short form: "Saving a kernel checkpoint… 30%". */
export function progressPercent(p: { what: string; done: number; total: number }): string {
  const percent = p.total > 0 ? Math.floor((100 * p.done) / p.total) : 0;
  return `${p.what.charAt(0).toUpperCase()}${p.what.slice(1)}… ${percent}%`;
}

export function cellLabel(cell: number | null): string {
  return cell === null ? '' : `[${cell}]`;
}

export function shape(p: IPreview): string {
  if (p.shape) {
    return p.shape.length === 1 ? `(${p.shape[0]},)` : `(${p.shape.join(', ')})`;
  }
  return p.length === undefined ? '' : `len ${p.length}`;
}

/** A value in one line: its repr when that is short, else its shape (or type) and size. */
export function brief(p: IPreview): string {
  if (p.repr.length <= 60 && !p.repr.includes('\n')) {
    return p.repr;
  }
  return `${shape(p) || p.type} ${humanBytes(p.size)}`;
}

/** Each checkpoint's number in its notebook (``#N``), from the timeline's rows. */
export function numbers(rows: IRow[]): Map<number, number> {
  return new Map(rows.map(r => [r.id, r.number]));
}

/** How a checkpoint is named on screen: ``#N`` in its notebook, or its store-wide id when it is not numbered. */
export function label(numbered: Map<number, number>, id: number): string {
  const n = numbered.get(id);
  return n === undefined ? `(id ${id})` : `#${n}`;
}

/** A checkpoint in one line, under the name it goes by: "#3 [5] · 12:00:01 · cell · ok". */
export function headline(r: ICheckpoint, name: string): string {
  return `${name} ${cellLabel(r.cell)} · ${clock(r.time)} · ${r.trigger} · ${r.status}`;
}
