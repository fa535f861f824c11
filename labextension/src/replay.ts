// Offers to rebuild, by running their cells again, the variables a restore could not bring back.
import { Dialog, Notification, showDialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';
import { type IReplayOffer, replay } from './api';
import { h } from './dom';

/** Ask before replaying: it runs code again, with its side effects, so the code is shown first. */
export function offerReplay(kernelId: string, offer: IReplayOffer): void {
  if (!offer.replayable) {
    return;
  }
  Notification.info(`Not restored, but can be rebuilt by running their cells again: ${offer.replayable}.`, {
    autoClose: false,
    actions: [
      {
        label: 'Review the cells',
        caption: 'See the code that would run again to rebuild these variables, then run it or not',
        callback: () => void review(kernelId, offer)
      }
    ]
  });
}

/** The code itself, cell by cell, as text: it came from the signed history, and it is what will run. */
export function replayCode(offer: IReplayOffer): HTMLElement {
  return h(
    'div',
    { class: 'jp-ckpt-replay-code' },
    offer.replay_cells.map(cell =>
      h(
        'div',
        { class: 'jp-ckpt-replay-cell' },
        h('span', { class: 'jp-ckpt-replay-count' }, `[${cell.count ?? ' '}]`),
        h('pre', {}, cell.source)
      )
    )
  );
}

async function review(kernelId: string, offer: IReplayOffer): Promise<void> {
  const answer = await showDialog({
    title: `Run these cells again to rebuild ${offer.replayable}?`,
    body: new Widget({ node: replayCode(offer) }),
    buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Run them' })]
  });
  if (!answer.button.accept) {
    return;
  }
  try {
    const variables = await replay(kernelId);
    const lines = Object.entries(variables).map(([name, outcome]) => `${name}: ${outcome}`);
    Notification.success(`Replay: ${lines.join('; ')}`, { autoClose: 8000 });
  } catch (error) {
    Notification.error(`Replay failed: ${error}`, { autoClose: false });
  }
}
