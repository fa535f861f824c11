// Views of a checkpoint that the sidebar and the notebook widget both draw, each with its own class prefix.
import type { ICheckpointDetails } from './api';
import { h } from './dom';
import { brief } from './format';

/** What changed from the previous checkpoint: one line per added, removed or changed variable. */
export function diffView(diff: ICheckpointDetails['diff'], prefix: string): HTMLElement {
  const items = [
    ...Object.entries(diff.added).map(([n, v]) => h('li', { class: `${prefix}added` }, `+ ${n} = ${brief(v)}`)),
    ...Object.entries(diff.removed).map(([n, v]) => h('li', { class: `${prefix}removed` }, `− ${n} (was ${brief(v)})`)),
    ...Object.entries(diff.changed).map(([n, c]) =>
      h('li', { class: `${prefix}changed-var` }, `~ ${n}: ${brief(c.before)} → ${brief(c.after)}`)
    )
  ];
  return items.length ? h('ul', { class: `${prefix}diff` }, items) : h('p', { class: `${prefix}empty` }, 'no changes');
}
