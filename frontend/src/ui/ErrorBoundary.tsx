import { Component, type ErrorInfo, type ReactNode } from "react";

interface Props {
  children: ReactNode;
  /** Shown in the message: which part of the editor failed. */
  area?: string;
  /** When this changes, the boundary tries again (e.g. the route). */
  resetKey?: unknown;
}

interface State {
  error: Error | null;
  resetKey: unknown;
}

/** Never a blank screen: a failure while drawing shows what happened and a way out. */
export class ErrorBoundary extends Component<Props, State> {
  state: State = { error: null, resetKey: this.props.resetKey };

  static getDerivedStateFromError(error: Error): Partial<State> {
    return { error };
  }

  static getDerivedStateFromProps(props: Props, state: State): Partial<State> | null {
    if (props.resetKey !== state.resetKey) return { error: null, resetKey: props.resetKey };
    return null;
  }

  componentDidCatch(error: Error, info: ErrorInfo) {
    console.error("dagwright editor:", error, info.componentStack);
  }

  render() {
    const { error } = this.state;
    if (!error) return this.props.children;
    return (
      <div className="error-screen" role="alert" data-testid="error-boundary">
        <h2>{this.props.area ? `The ${this.props.area} failed` : "The editor failed"}</h2>
        <p>
          <code>{error.name}</code> {error.message}
        </p>
        <p className="muted">Unsaved changes are kept in this browser; reloading restores them.</p>
        <div className="row">
          <button className="btn" onClick={() => this.setState({ error: null })}>
            Try again
          </button>
          <button className="btn" onClick={() => window.location.reload()}>
            Reload
          </button>
          <a className="btn" href="#/">
            Back to apps
          </a>
        </div>
      </div>
    );
  }
}
