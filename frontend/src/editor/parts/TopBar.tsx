// The editor's top bar: back to the list, the app's title, and the commands (undo, redo,
// layout, validate, history, export, save, publish, the API dialog, help).

import { api } from "../../api/client";
import type { AppOut } from "../../api/types";
import { downloadJson } from "../../ui/download";
import { toastError } from "../../ui/toast";
import type { VersionRef } from "../hooks/useFlowDocument";
import { AppTitle } from "./AppTitle";
import { ShortcutsHelp } from "./ShortcutsHelp";

export interface TopBarProps {
  app: AppOut;
  onAppChange: (app: AppOut) => void;
  baseVersion: VersionRef | null;
  dirty: boolean;
  empty: boolean;
  canUndo: boolean;
  canRedo: boolean;
  errorCount: number;
  onUndo: () => void;
  onRedo: () => void;
  onLayout: () => void;
  onValidate: () => void;
  onToggleVersions: () => void;
  onSave: () => void;
  /** Publish the open version as it is. */
  onPublish: () => void;
  /** Save the canvas first, then publish. */
  onPreparePublish: () => void;
  onShowEndpoint: () => void;
  showHelp: boolean;
  onShowHelp: (open: boolean) => void;
}

export function TopBar(props: TopBarProps) {
  const { app, baseVersion, dirty } = props;
  const openIsPublished = !!baseVersion && baseVersion.id === app.published_version_id;
  const exportApp = async () => {
    try {
      downloadJson(`${app.slug}.dagwright.json`, await api.exportApp(app.slug));
    } catch (e) {
      toastError(e, "Could not export");
    }
  };
  return (
    <header className="topbar">
      <a className="btn btn-ghost" href="#/" data-testid="back" title="All apps">
        ← Apps
      </a>
      <AppTitle app={app} onAppChange={props.onAppChange} baseVersion={baseVersion} openIsPublished={openIsPublished} dirty={dirty} />
      <span className="spacer" />
      <button className="btn btn-ghost" data-testid="undo" title="Undo (Ctrl+Z)" aria-label="Undo" onClick={props.onUndo} disabled={!props.canUndo}>
        ↶
      </button>
      <button className="btn btn-ghost" data-testid="redo" title="Redo (Ctrl+Shift+Z)" aria-label="Redo" onClick={props.onRedo} disabled={!props.canRedo}>
        ↷
      </button>
      <button className="btn" data-testid="layout" title="Auto-layout (Shift+L)" onClick={props.onLayout}>
        Layout
      </button>
      <button className="btn" data-testid="validate" title="Validate (Ctrl+Enter)" onClick={props.onValidate}>
        Validate{props.errorCount > 0 && <span className="badge badge-error">{props.errorCount}</span>}
      </button>
      <button className="btn" data-testid="versions" onClick={props.onToggleVersions}>
        History
      </button>
      <button className="btn" data-testid="export" onClick={exportApp} title="Download the app and its versions as JSON">
        Export
      </button>
      <button className="btn btn-primary" data-testid="save" title="Save a version (Ctrl+S)" onClick={props.onSave}>
        Save
      </button>
      <button
        className="btn btn-accent"
        data-testid="publish"
        disabled={!baseVersion && props.empty}
        title={dirty || !baseVersion ? "Save the canvas as a version and publish it" : `Publish v${baseVersion.number}`}
        onClick={() => (dirty || !baseVersion ? props.onPreparePublish() : props.onPublish())}
      >
        Publish
      </button>
      {!!app.published_version_id && (
        <button className="btn" data-testid="endpoint" onClick={props.onShowEndpoint}>
          API
        </button>
      )}
      <ShortcutsHelp open={props.showHelp} onOpenChange={props.onShowHelp} />
    </header>
  );
}
