// Views of checkpoints that the sidebar and the notebook widget both draw, each with its own class prefix
// ('jp-ckpt-', 'ckpt-') and stylesheet. Nothing from JupyterLab here: the widget is drawn outside Lab too.
import type { ICheckpointDetails, IRow } from './api';
import { h } from './dom';
import { age, brief, cellLabel, clock, humanBytes, shape } from './format';

/** What a timeline row takes from the view that lists it. */
export interface IRowContext {
  /** The class prefix of the view. */
  prefix: string;
  /** The view's classes for the row's state (selected, newest, where the namespace is), false when not. */
  marks: (string | false)[];
  /** Another checkpoint's name on screen: the one a branch starts from. */
  name: (id: number) => string;
  select: () => void;
}

/**
 * A checkpoint on the timeline, indented by its branch: number, time, cell, trigger, status, size and tag,
 * then the variables it changed; where a kernel started, marked so. Its hover text says it all in full.
 */
export function rowView(r: IRow, { prefix, marks, name, select }: IRowContext): HTMLElement {
  const changed = r.changed.join(', ');
  return h(
    'li',
    {
      class: [`${prefix}row`, ...marks, r.kernel_start && `${prefix}kernel-start`].filter(Boolean).join(' '),
      'data-id': r.id,
      style: `padding-left: ${0.5 + 1.25 * r.depth}em`,
      title:
        `Kernel checkpoint #${r.number} (id ${r.id}), ${new Date(r.time * 1000).toLocaleString()} ` +
        `(${age(Date.now() / 1000 - r.time)} ago)` +
        (r.kernel_start ? '\nA new kernel started here' : '') +
        (changed ? `\nChanged: ${changed}` : ''),
      onclick: select
    },
    r.kernel_start && h('span', { class: `${prefix}kernel-label` }, 'new kernel'),
    r.branch_from !== null && h('span', { class: `${prefix}branch` }, `↳ from ${name(r.branch_from)}`),
    h('span', { class: `${prefix}id` }, `#${r.number}`),
    h('span', { class: `${prefix}time` }, clock(r.time)),
    h('span', { class: `${prefix}cell` }, cellLabel(r.cell)),
    h('span', { class: `${prefix}trigger` }, r.trigger),
    h('span', { class: `${prefix}status ${prefix}status-${r.status}` }, r.status),
    h('span', { class: `${prefix}size` }, humanBytes(r.new_bytes)),
    r.tag && h('span', { class: `${prefix}tag` }, r.tag),
    changed && h('span', { class: `${prefix}changed` }, changed)
  );
}

/**
 * What changed from the previous checkpoint, then every variable the checkpoint holds, under headings of
 * the view's ``level``.
 */
export function contentsView(d: ICheckpointDetails, prefix: string, level: 'h4' | 'h5'): HTMLElement[] {
  return [
    h(level, {}, 'Changes from the previous checkpoint'),
    diffView(d.diff, prefix),
    h(level, {}, 'Variables'),
    variablesView(d, prefix)
  ];
}

/** One line per added, removed or changed variable. */
function diffView(diff: ICheckpointDetails['diff'], prefix: string): HTMLElement {
  const items = [
    ...Object.entries(diff.added).map(([n, v]) => h('li', { class: `${prefix}added` }, `+ ${n} = ${brief(v)}`)),
    ...Object.entries(diff.removed).map(([n, v]) => h('li', { class: `${prefix}removed` }, `− ${n} (was ${brief(v)})`)),
    ...Object.entries(diff.changed).map(([n, c]) =>
      h('li', { class: `${prefix}changed-var` }, `~ ${n}: ${brief(c.before)} → ${brief(c.after)}`)
    )
  ];
  return items.length ? h('ul', { class: `${prefix}diff` }, items) : h('p', { class: `${prefix}empty` }, 'no changes');
}

/**
 * The variables by name, one table row each: name, type, shape, size and value (the full repr is its tooltip),
 * those the checkpoint added or changed marked. Each stylesheet lays a row out for its width.
 */
function variablesView(d: ICheckpointDetails, prefix: string): HTMLElement {
  const names = Object.keys(d.variables).sort();
  if (!names.length) {
    return h('p', { class: `${prefix}empty` }, 'no variables');
  }
  const touched = new Set([...Object.keys(d.diff.added), ...Object.keys(d.diff.changed)]);
  return h(
    'table',
    { class: `${prefix}variables` },
    h('tr', {}, ['name', 'type', 'shape', 'size', 'value'].map(c => h('th', {}, c))),
    names.map(name => {
      const v = d.variables[name];
      return h(
        'tr',
        { class: touched.has(name) && `${prefix}touched`, 'data-name': name },
        h('td', { class: `${prefix}name` }, name),
        h('td', { class: `${prefix}type` }, v.type),
        h('td', {}, shape(v)),
        h('td', {}, humanBytes(v.size)),
        h('td', { class: `${prefix}repr`, title: `${v.type}\n${v.repr}` }, v.repr)
      );
    })
  );
}
