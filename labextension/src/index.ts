// jupyter-ckpt in JupyterLab: the Checkpoints sidebar, the status-bar item, crash notifications, commands.
import { ILabShell, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { CrashWatcher } from './crash';
import { isNotebook, TimelineModel } from './model';
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
  description: 'Checkpoints of the notebook kernel: timeline, restore, crash notifications.',
  autoStart: true,
  requires: [ILabShell, ISettingRegistry],
  optional: [ICommandPalette, IStatusBar],
  activate: async (
    app: JupyterFrontEnd,
    shell: ILabShell,
    registry: ISettingRegistry,
    palette: ICommandPalette | null,
    statusBar: IStatusBar | null
  ) => {
    const model = new TimelineModel();
    const panel = new CheckpointsPanel(model);
    shell.add(panel, 'right', { rank: 600 });
    const follow = () => {
      if (isNotebook(shell.currentWidget)) {
        model.setNotebook(shell.currentWidget);
      }
    };
    shell.currentChanged.connect(follow);
    follow();
    const openNotebooks = () => Array.from(shell.widgets('main')).filter(isNotebook).map(w => w.context.path);
    const crashes = new CrashWatcher(openNotebooks);

    const hasNotebook = () => model.notebook !== null;
    app.commands.addCommand(CommandIDs.open, {
      label: 'Show Checkpoints',
      caption: "The active notebook's checkpoint timeline",
      execute: () => shell.activateById(panel.id)
    });
    app.commands.addCommand(CommandIDs.save, {
      label: 'Checkpoint the Notebook Kernel Now',
      isEnabled: hasNotebook,
      execute: () => panel.checkpointNow()
    });
    app.commands.addCommand(CommandIDs.restore, {
      label: 'Restore the Selected Checkpoint',
      isEnabled: () => panel.selected !== null,
      execute: () => panel.restoreSelected()
    });
    for (const command of Object.values(CommandIDs)) {
      palette?.addItem({ command, category: 'Checkpoints' });
    }

    statusBar?.registerStatusItem(PLUGIN_ID, {
      item: new CheckpointStatus(model, () => shell.activateById(panel.id)),
      align: 'left',
      rank: 4,
      isActive: hasNotebook
    });

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
