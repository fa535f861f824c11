// jupyter-ckpt in JupyterLab and Jupyter Notebook 7: the Kernel checkpoints sidebar, the status item,
// crash notifications, commands. Nothing here needs JupyterLab's shell: the notebook comes from the tracker.
import { ILabShell, type JupyterFrontEnd, type JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { CrashWatcher } from './crash';
import { NAME } from './format';
import { TimelineModel } from './model';
import { CheckpointsPanel } from './panel';
import { CheckpointStatus } from './status';

const PLUGIN_ID = 'jupyter-ckpt:plugin';

namespace CommandIDs {
  export const open = 'jupyter-ckpt:open';
  export const save = 'jupyter-ckpt:checkpoint-now';
  export const restore = 'jupyter-ckpt:restore-selected';
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: `${NAME} of the notebook's kernel state: timeline, restore, crash notifications.`,
  autoStart: true,
  requires: [INotebookTracker, ISettingRegistry],
  optional: [ILabShell, ICommandPalette, IStatusBar],
  activate: async (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    registry: ISettingRegistry,
    labShell: ILabShell | null,
    palette: ICommandPalette | null,
    statusBar: IStatusBar | null
  ) => {
    const model = new TimelineModel();
    const panel = new CheckpointsPanel(model);
    app.shell.add(panel, 'right', { rank: 600 });
    const follow = () => model.setNotebook(tracker.currentWidget);
    tracker.currentChanged.connect(follow);
    follow();
    const openNotebooks = () => {
      const paths: string[] = [];
      tracker.forEach(w => {
        paths.push(w.context.path);
      });
      return paths;
    };
    const crashes = new CrashWatcher(openNotebooks);
    const show = () => app.shell.activateById(panel.id);

    const hasNotebook = () => model.notebook !== null;
    app.commands.addCommand(CommandIDs.open, {
      label: `Show ${NAME}`,
      caption: `The current notebook's timeline of ${NAME.toLowerCase()}`,
      execute: show
    });
    app.commands.addCommand(CommandIDs.save, {
      label: 'Take a Kernel Checkpoint Now',
      isEnabled: hasNotebook,
      execute: () => panel.checkpointNow()
    });
    app.commands.addCommand(CommandIDs.restore, {
      label: 'Restore the Selected Kernel Checkpoint',
      isEnabled: () => panel.selected !== null,
      execute: () => panel.restoreSelected()
    });
    for (const command of Object.values(CommandIDs)) {
      palette?.addItem({ command, category: NAME });
    }

    const status = new CheckpointStatus(model, show);
    if (labShell !== null && statusBar !== null) {
      statusBar.registerStatusItem(PLUGIN_ID, { item: status, align: 'left', rank: 4, isActive: hasNotebook });
    } else {
      // Notebook 7 has no status bar: the item sits in the top area, beside its "Last Checkpoint" (of the file).
      app.shell.add(status, 'top', { rank: 1000 });
    }

    const settings = await registry.load(PLUGIN_ID);
    const apply = () => {
      const seconds = settings.get('pollInterval').composite as number;
      model.pollInterval = seconds;
      crashes.pollInterval = seconds;
    };
    settings.changed.connect(apply);
    apply();
  }
};

export default plugin;
