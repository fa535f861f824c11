// The "Kernel checkpoints" sidebar: the current notebook's timeline, the selected checkpoint's details, and actions.
import { Dialog, InputDialog, Notification, showDialog } from '@jupyterlab/apputils';
import { historyIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';
import {
  checkpointDetails,
  deleteCheckpoint,
  type ICheckpointDetails,
  type IRow,
  type IResumeOffer,
  restoreCheckpoint,
  saveCheckpoint,
  tagCheckpoint
} from './api';
import { h } from './dom';
import {
  cellLabel,
  clock,
  headline,
  NAME,
  progressLine,
  remoteLine,
  resumeLine,
  storeDetails,
  storeLine
} from './format';
import type { TimelineModel } from './model';
import { offerReplay } from './replay';
import { contentsView, rowView } from './views';

export class CheckpointsPanel extends Widget {
  private _selected: number | null = null;
  private _details: ICheckpointDetails | null = null;
  private _listKey = '';
  private _header = h('div', { class: 'jp-ckpt-header' });
  private _progress = h('div', { class: 'jp-ckpt-progress' });
  private _list = h('ul', { class: 'jp-ckpt-list' });
  private _pane = h('div', { class: 'jp-ckpt-details' });
  private _status = h('div', { class: 'jp-ckpt-status-line' });

  constructor(private _model: TimelineModel) {
    super();
    this.id = 'jupyter-ckpt-sidebar';
    this.title.icon = historyIcon;
    this.title.caption = NAME;
    this.addClass('jp-ckpt-panel');
    this.node.append(this._header, this._progress, this._list, this._pane, this._status);
    _model.changed.connect(this._update, this);
    this._update();
  }

  /** The selected checkpoint, if any. */
  get selected(): number | null {
    return this._selected;
  }

  async checkpointNow(): Promise<void> {
    const { session, kernelId } = this._model;
    if (session === null || kernelId === null) {
      return this._report('no running kernel to checkpoint', true);
    }
    await this._act(async () => {
      const record = await saveCheckpoint(session, kernelId);
      await this._model.refresh();
      return `kernel checkpoint ${this._model.label(record.id)} saved`;
    });
  }

  /** Restore what the kernel offers to resume, in one click: the restore stays on the timeline, to undo. */
  async resume(): Promise<void> {
    const offer = this._model.offer;
    const kernelId = this._model.kernelId;
    if (offer === null || kernelId === null) {
      return;
    }
    this._model.dropOffer();
    await this._act(async () => {
      const result = await restoreCheckpoint(offer.checkpoint, kernelId);
      Notification.success(result.summary, { autoClose: 5000 });
      offerReplay(kernelId, result);
      return result.summary;
    });
  }

  async restoreSelected(): Promise<void> {
    const d = this._details;
    const kernelId = this._model.kernelId;
    if (d === null) {
      return;
    }
    if (kernelId === null) {
      return this._report('start the kernel first: a checkpoint is restored into a running kernel', true);
    }
    const answer = await showDialog({
      title: `Restore kernel checkpoint ${this._model.label(d.id)}?`,
      body:
        `The kernel's variables go back to what they were after cell ${cellLabel(d.cell)} at ${clock(d.time)}. ` +
        'The current state stays on the timeline, so this can be undone.',
      buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Restore' })]
    });
    if (!answer.button.accept) {
      return;
    }
    await this._act(async () => {
      const result = await restoreCheckpoint(d.id, kernelId);
      Notification.success(result.summary, { autoClose: 5000 });
      offerReplay(kernelId, result);
      return result.summary;
    });
  }

  async tagSelected(): Promise<void> {
    const d = this._details;
    if (d === null) {
      return;
    }
    const answer = await InputDialog.getText({
      title: `Tag kernel checkpoint ${this._model.label(d.id)} (empty: remove the tag)`,
      text: d.tag ?? ''
    });
    if (!answer.button.accept) {
      return;
    }
    const tag = (answer.value ?? '').trim() || null;
    await this._act(async () => {
      await tagCheckpoint(d.id, tag);
      const label = `kernel checkpoint ${this._model.label(d.id)}`;
      return tag ? `${label} tagged ${tag}` : `${label} untagged`;
    });
  }

  async deleteSelected(): Promise<void> {
    const d = this._details;
    if (d === null) {
      return;
    }
    const answer = await showDialog({
      title: `Delete kernel checkpoint ${this._model.label(d.id)}?`,
      body: 'It leaves the timeline for good; its data goes at the next gc.',
      buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Delete' })]
    });
    if (!answer.button.accept) {
      return;
    }
    const label = `kernel checkpoint ${this._model.label(d.id)}`;
    await this._act(async () => {
      await deleteCheckpoint(d.id);
      this._select(null);
      return `${label} deleted`;
    });
  }

  /** Run an action, report its outcome, and show the timeline as it is now. */
  private async _act(action: () => Promise<string>): Promise<void> {
    try {
      this._report(await action(), false);
    } catch (e) {
      this._report((e as Error).message, true);
    }
    await this._model.refresh();
    if (this._selected !== null) {
      await this._select(this._selected);
    }
  }

  private _report(message: string, error: boolean): void {
    this._status.textContent = message;
    this._status.classList.toggle('jp-ckpt-error', error);
  }

  private _offerView(offer: IResumeOffer): HTMLElement {
    return h('div', { class: 'jp-ckpt-resume' }, [
      h('span', { class: 'jp-ckpt-resume-line' }, resumeLine(offer, Date.now() / 1000)),
      h('button', { class: 'jp-ckpt-resume-button jp-mod-styled jp-mod-accept', onclick: () => void this.resume() }, 'Resume'),
      h('button', { class: 'jp-ckpt-resume-dismiss jp-mod-styled', title: 'Not now', onclick: () => this._model.dropOffer() }, 'Not now')
    ]);
  }

  private _update(): void {
    const model = this._model;
    const name = model.session ?? 'no notebook';
    this._header.replaceChildren(
      h('div', { class: 'jp-ckpt-title' }, NAME),
      h('div', { class: 'jp-ckpt-notebook', title: name }, name),
      ...(remoteLine(model.remote) ? [h('div', { class: 'jp-ckpt-remote' }, remoteLine(model.remote))] : []),
      ...(model.store ? [h('div', { class: 'jp-ckpt-store', title: storeDetails(model.store) }, storeLine(model.store))] : []),
      ...(model.offer ? [this._offerView(model.offer)] : []),
      h('button', { class: 'jp-ckpt-save jp-mod-styled', onclick: () => void this.checkpointNow() }, 'Checkpoint now')
    );
    const progress = model.progress;
    this._progress.replaceChildren(
      ...(progress === null
        ? []
        : [
            h('div', {}, progressLine(progress)),
            h('progress', { max: progress.total, value: progress.done, title: progressLine(progress) })
          ])
    );
    const rows = model.rows;
    // Redraw only on change: a row replaced under the pointer would swallow the click.
    const key = JSON.stringify([rows.map(r => [r.id, r.tag]), this._selected, model.error]);
    if (key !== this._listKey) {
      this._listKey = key;
      this._list.replaceChildren(
        ...(rows.length ? rows.map(r => this._row(r)) : [h('li', { class: 'jp-ckpt-empty' }, model.error || 'no checkpoints yet')])
      );
    }
    if (this._selected !== null && !model.checkpoints.some(c => c.id === this._selected)) {
      void this._select(null);
    }
    if (model.error) {
      this._report(model.error, true);
    }
  }

  private _row(r: IRow): HTMLElement {
    const model = this._model;
    const newest = model.checkpoints[model.checkpoints.length - 1];
    return rowView(r, {
      prefix: 'jp-ckpt-',
      marks: [r.id === this._selected && 'jp-mod-selected', r.id === newest?.id && 'jp-ckpt-newest'],
      name: id => model.label(id),
      select: () => void this._select(r.id)
    });
  }

  private async _select(id: number | null): Promise<void> {
    this._selected = id;
    this._update();
    if (id === null) {
      this._details = null;
      this._pane.replaceChildren();
      return;
    }
    try {
      const details = await checkpointDetails(id);
      if (this._selected === id) {
        this._details = details;
        this._pane.replaceChildren(this._detailsView(details));
      }
    } catch (e) {
      this._report((e as Error).message, true);
    }
  }

  private _detailsView(d: ICheckpointDetails): HTMLElement {
    const cell = d.cells[d.cells.length - 1];
    return h(
      'div',
      {},
      h('h3', {}, headline(d, this._model.label(d.id))),
      d.message && h('p', { class: 'jp-ckpt-message' }, d.message),
      h(
        'div',
        { class: 'jp-ckpt-actions' },
        h('button', { class: 'jp-ckpt-restore jp-mod-styled jp-mod-accept', onclick: () => void this.restoreSelected() }, 'Restore'),
        h('button', { class: 'jp-ckpt-tag-button jp-mod-styled', onclick: () => void this.tagSelected() }, 'Tag'),
        h('button', { class: 'jp-ckpt-delete jp-mod-styled jp-mod-warn', onclick: () => void this.deleteSelected() }, 'Delete')
      ),
      contentsView(d, 'jp-ckpt-', 'h4'),
      cell && h('h4', {}, `Cell ${cellLabel(cell.count)}`),
      cell && h('pre', { class: 'jp-ckpt-source' }, cell.source)
    );
  }
}
