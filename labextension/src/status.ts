// The status item: how old the current notebook's last kernel checkpoint is, whether one is being written,
// how far a save or restore is.
import { Widget } from '@lumino/widgets';
import { age, progressPercent, remoteLine } from './format';
import type { TimelineModel } from './model';

export class CheckpointStatus extends Widget {
  private readonly _title = "Kernel checkpoints (of the kernel's variables, not of the file): click to open the timeline";

  constructor(
    private _model: TimelineModel,
    onClick: () => void
  ) {
    super();
    this.addClass('jp-ckpt-statusbar');
    this.node.title = this._title;
    this.node.addEventListener('click', onClick);
    _model.changed.connect(this._update, this);
    // The age keeps growing between polls.
    const timer = window.setInterval(() => this._update(), 1000);
    this.disposed.connect(() => window.clearInterval(timer));
    this._update();
  }

  private _update(): void {
    const checkpoints = this._model.checkpoints;
    const last = checkpoints[checkpoints.length - 1];
    const text = last ? `Kernel checkpoint ${age(Date.now() / 1000 - last.time)} ago` : 'No kernel checkpoint yet';
    const progress = this._model.progress;
    const working = progress !== null && progress.done < progress.total;
    if (working) {
      this.node.textContent = progressPercent(progress);
    } else {
      this.node.textContent = this._model.writing ? `${text} · writing…` : text;
      const remote = this._model.remote;
      if (remote !== null && (remote.error || remote.behind > 0)) {
        this.node.textContent += remote.error ? ' · remote unreachable' : ` · ${remote.behind} not uploaded`;
      }
    }
    this.node.title = [this._title, remoteLine(this._model.remote)].filter(Boolean).join('\n');
    this.node.classList.toggle('jp-ckpt-writing', this._model.writing || working);
    this.setHidden(this._model.notebook === null); // Notebook 7's file browser page
  }
}
