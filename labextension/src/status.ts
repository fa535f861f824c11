// The status-bar item: how old the active notebook's last checkpoint is, and whether one is being written.
import { Widget } from '@lumino/widgets';
import { age } from './format';
import { TimelineModel } from './model';

export class CheckpointStatus extends Widget {
  constructor(
    private _model: TimelineModel,
    onClick: () => void
  ) {
    super();
    this.addClass('jp-ckpt-statusbar');
    this.node.title = 'Checkpoints of this notebook: click to open the timeline';
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
    const text = last ? `Checkpoint ${age(Date.now() / 1000 - last.time)} ago` : 'No checkpoint yet';
    this.node.textContent = this._model.writing ? `${text} · writing…` : text;
    this.node.classList.toggle('jp-ckpt-writing', this._model.writing);
  }
}
