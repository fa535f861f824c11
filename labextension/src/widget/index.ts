// The browser half of jupyter_ckpt.widget.Timeline (%checkpoint timeline): draws the traits, sends back clicks.
// esbuild bundles it, with the modules the sidebar uses, into the ESM file anywidget loads (jupyter_ckpt/static/widget.js).
import type { AnyModel, AnyWidget, RenderProps } from '@anywidget/types';
import type { ICheckpointDetails, IRow } from '../api';
import { h } from '../dom';
import { headline, label, numbers } from '../format';
import { contentsView, rowView } from '../views';

/** The traits jupyter_ckpt.widget.Timeline syncs. */
interface ITraits {
  session: string;
  /** The rows of jupyter_ckpt.timeline.tree_rows, as GET checkpoints gives them. */
  rows: IRow[];
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
  return label(numbers(model.get('rows')), id);
}

function row(r: IRow, model: Model): HTMLElement {
  return rowView(r, {
    prefix: 'ckpt-',
    marks: [r.id === model.get('selected') && 'ckpt-selected', r.id === model.get('head') && 'ckpt-head'],
    name: id => nameOf(model, id),
    select: () => {
      model.set('selected', r.id);
      model.save_changes();
    }
  });
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
    h('h4', {}, `Kernel checkpoint ${headline(d, nameOf(model, d.id))}`),
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
    contentsView(d, 'ckpt-', 'h5')
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
