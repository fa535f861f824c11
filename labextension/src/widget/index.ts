// The browser half of jupyter_ckpt.widget.Timeline (%checkpoint timeline): draws the traits, sends back clicks.
// esbuild bundles it, with the modules the sidebar uses, into the ESM file anywidget loads (jupyter_ckpt/static/widget.js).
import type { AnyModel, AnyWidget, RenderProps } from '@anywidget/types';
import type { ICheckpoint, ICheckpointDetails } from '../api';
import { h } from '../dom';
import { cellLabel, clock, humanBytes, label, shape } from '../format';
import { diffView } from '../views';

/** A row of jupyter_ckpt.widget.tree_rows: a checkpoint with its number in the session and its place in the tree. */
interface IWidgetRow extends ICheckpoint {
  number: number;
  depth: number;
  branch_from: number | null;
}

/** The traits jupyter_ckpt.widget.Timeline syncs. */
interface ITraits {
  session: string;
  rows: IWidgetRow[];
  head: number | null;
  selected: number | null;
  /** The selected checkpoint's details, or {} when none is selected. */
  details: ICheckpointDetails | { id?: undefined };
  message: string;
  error: boolean;
}

type Model = AnyModel<ITraits>;

/** What the user clicked, for Timeline._on_action. */
type Action = { action: 'restore' | 'delete'; id: number } | { action: 'tag'; id: number; tag: string };

/** A checkpoint's name on screen: its number in the session, as the rows show it. */
function nameOf(model: Model, id: number): string {
  return label(new Map(model.get('rows').map(r => [r.id, r.number])), id);
}

function row(r: IWidgetRow, model: Model): HTMLElement {
  const classes = ['ckpt-row'];
  if (r.id === model.get('selected')) {
    classes.push('ckpt-selected');
  }
  if (r.id === model.get('head')) {
    classes.push('ckpt-head');
  }
  const select = () => {
    model.set('selected', r.id);
    model.save_changes();
  };
  return h(
    'li',
    { class: classes.join(' '), 'data-id': r.id, style: `padding-left: ${0.5 + 1.25 * r.depth}em`, onclick: select },
    r.branch_from !== null && h('span', { class: 'ckpt-branch' }, `↳ from ${nameOf(model, r.branch_from)}`),
    h('span', { class: 'ckpt-id', title: `id ${r.id}` }, `#${r.number}`),
    h('span', { class: 'ckpt-time' }, clock(r.time)),
    h('span', { class: 'ckpt-cell' }, cellLabel(r.cell)),
    h('span', { class: 'ckpt-trigger' }, r.trigger),
    h('span', { class: `ckpt-status ckpt-status-${r.status}` }, r.status),
    h('span', { class: 'ckpt-size' }, humanBytes(r.new_bytes)),
    h('span', { class: 'ckpt-changed' }, r.changed.join(', ')),
    r.tag && h('span', { class: 'ckpt-tag' }, r.tag)
  );
}

function variablesTable(d: ICheckpointDetails): HTMLElement {
  const names = Object.keys(d.variables).sort();
  if (!names.length) {
    return h('p', { class: 'ckpt-empty' }, 'no variables');
  }
  const touched = new Set([...Object.keys(d.diff.added), ...Object.keys(d.diff.changed)]);
  return h(
    'table',
    { class: 'ckpt-variables' },
    h('tr', {}, ['name', 'type', 'shape', 'size', 'value'].map(c => h('th', {}, c))),
    names.map(name => {
      const v = d.variables[name];
      return h(
        'tr',
        { class: touched.has(name) && 'ckpt-touched' },
        h('td', { class: 'ckpt-name' }, name),
        h('td', {}, v.type),
        h('td', {}, shape(v)),
        h('td', {}, humanBytes(v.size)),
        h('td', { class: 'ckpt-repr' }, v.repr)
      );
    })
  );
}

function detailsPane(model: Model): HTMLElement {
  const d = model.get('details');
  if (d.id === undefined) {
    return h('p', { class: 'ckpt-empty' }, 'Select a checkpoint to see its variables.');
  }
  const send = (action: Action) => model.send(action);
  const tagInput = h('input', { class: 'ckpt-tag-input', placeholder: 'tag', value: d.tag ?? '' }) as HTMLInputElement;
  const confirmDelete = () => {
    if (window.confirm(`Delete kernel checkpoint ${nameOf(model, d.id)}?`)) {
      send({ action: 'delete', id: d.id });
    }
  };
  return h(
    'div',
    {},
    h('h4', {}, `Kernel checkpoint ${nameOf(model, d.id)} ${cellLabel(d.cell)} · ${clock(d.time)} · ${d.trigger} · ${d.status}`),
    d.message && h('p', { class: 'ckpt-message' }, d.message),
    h(
      'div',
      { class: 'ckpt-actions' },
      h('button', { class: 'ckpt-restore', onclick: () => send({ action: 'restore', id: d.id }) }, 'Restore'),
      tagInput,
      h(
        'button',
        { class: 'ckpt-tag-button', onclick: () => send({ action: 'tag', id: d.id, tag: tagInput.value.trim() }) },
        'Tag'
      ),
      h('button', { class: 'ckpt-delete', onclick: confirmDelete }, 'Delete')
    ),
    h('h5', {}, 'Changes from the previous checkpoint'),
    diffView(d.diff, 'ckpt-'),
    h('h5', {}, 'Variables'),
    variablesTable(d)
  );
}

function render({ model, el }: RenderProps<ITraits>): () => void {
  const list = h('ul', { class: 'ckpt-list' });
  const pane = h('div', { class: 'ckpt-details' });
  const status = h('div', { class: 'ckpt-status-line' });
  const session = model.get('session');
  el.append(
    h(
      'div',
      { class: 'ckpt-timeline' },
      h('div', { class: 'ckpt-header', title: session }, `Checkpoints · ${session.split(/[\\/]/).pop()}`),
      h('div', { class: 'ckpt-body' }, list, pane),
      status
    )
  );
  const drawList = () => {
    const rows = model.get('rows');
    list.replaceChildren(...(rows.length ? rows.map(r => row(r, model)) : [h('li', {}, 'no checkpoints yet')]));
  };
  const drawDetails = () => pane.replaceChildren(detailsPane(model));
  const drawStatus = () => {
    status.textContent = model.get('message');
    status.classList.toggle('ckpt-error', model.get('error'));
  };
  const listeners: [string, () => void][] = [
    ['change:rows change:head change:selected', drawList],
    ['change:details', drawDetails],
    ['change:message change:error', drawStatus]
  ];
  for (const [events, draw] of listeners) {
    model.on(events, draw);
    draw();
  }
  return () => {
    for (const [events, draw] of listeners) {
      model.off(events, draw);
    }
  };
}

export default { render } satisfies AnyWidget<ITraits>;
