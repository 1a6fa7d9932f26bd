// Keeps a rendering bug in one view from blanking the whole panel: the rest keeps working.

import { Component, type ReactNode } from "react";

export class ViewBoundary extends Component<{ name: string; children: ReactNode }, { error: Error | null }> {
  state: { error: Error | null } = { error: null };
  static getDerivedStateFromError(error: Error) {
    return { error };
  }
  render() {
    if (this.state.error) {
      return (
        <div className="dw-error" role="alert">
          <div className="dw-error-title">The {this.props.name} could not be shown</div>
          <div className="dw-error-message">{this.state.error.message}</div>
          <button type="button" className="dw-link" onClick={() => this.setState({ error: null })}>
            try again
          </button>
        </div>
      );
    }
    return this.props.children;
  }
}
