// Offers to rebuild, by running their cells again, the variables a restore could not bring back.
import { Notification } from '@jupyterlab/apputils';
import { requestAPI } from './api';

/** Ask before replaying: it runs code again, with its side effects. Nothing to offer when empty. */
export function offerReplay(kernelId: string, replayable: string): void {
  if (!replayable) {
    return;
  }
  Notification.info(`Not restored, but can be rebuilt by running their cells again: ${replayable}.`, {
    autoClose: false,
    actions: [
      {
        label: 'Run the cells again',
        caption: 'Rebuild these variables by running the recorded cells that made them (their side effects too)',
        callback: () => void replay(kernelId)
      }
    ]
  });
}

async function replay(kernelId: string): Promise<void> {
  try {
    const result = await requestAPI<{ variables: { [name: string]: string } }>('replay', {
      method: 'POST',
      body: JSON.stringify({ kernel_id: kernelId })
    });
    const lines = Object.entries(result.variables).map(([name, outcome]) => `${name}: ${outcome}`);
    Notification.success(`Replay: ${lines.join('; ')}`, { autoClose: 8000 });
  } catch (error) {
    Notification.error(`Replay failed: ${error}`, { autoClose: false });
  }
}
