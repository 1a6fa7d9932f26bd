// A conversation waiting for a person's approval of a tool call: the request's form (the
// tool, its input, approve or reject with a comment), answered here. Once answered the page
// reads the conversation again and follows it as it goes on.

import { useEffect, useState } from "react";
import { humanApi, type HumanRequest } from "../integrations/api";
import { RequestForm } from "../integrations/RequestForm";
import { describeError } from "../ui/toast";

export function ApprovalWait({ conversationId, onAnswered }: { conversationId: string; onAnswered: () => void }) {
  const [requests, setRequests] = useState<HumanRequest[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let cancelled = false;
    humanApi.ofConversation(conversationId).then(
      (found) => !cancelled && setRequests(found.filter((r) => r.status === "waiting")),
      (e: unknown) => !cancelled && setError(describeError(e).message),
    );
    return () => {
      cancelled = true;
    };
  }, [conversationId]);
  return (
    <div className="dw-waiting" role="region" aria-label="Waiting for your approval" data-testid="tqa-approval">
      <h4>The Engineer's tool call waits for your approval</h4>
      {error && <p role="alert">{error}</p>}
      {requests?.map((request) => (
        <RequestForm key={request.id} request={request} onAnswered={onAnswered} />
      ))}
    </div>
  );
}
