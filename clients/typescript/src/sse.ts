/** One server-sent event as the stream spelled it. */
export interface SSEMessage {
  /** The last `id:` seen so far on the stream (it carries over, per the spec). */
  id: string | undefined;
  /** The `event:` field; "message" when absent. */
  event: string;
  /** The `data:` lines, joined with "\n". */
  data: string;
  /** The `retry:` field, if the event had one. */
  retry?: number;
}

/**
 * Reads a text/event-stream body, yielding each event as it completes. Lines
 * may end in "\n", "\r\n" or "\r"; comments (":" lines) are skipped. The
 * reader is released (and the stream cancelled) when the consumer stops.
 */
export async function* parseSSE(body: ReadableStream<Uint8Array>): AsyncGenerator<SSEMessage> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  let lastId: string | undefined;
  let event = "";
  let data: string[] = [];
  let retry: number | undefined;
  let sawCR = false; // the previous chunk ended in "\r": a "\n" next is its pair
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        return; // an event without its blank line is incomplete: dropped, as the spec says
      }
      buf += decoder.decode(value, { stream: true });
      if (sawCR && buf.startsWith("\n")) {
        buf = buf.slice(1);
      }
      sawCR = false;
      for (;;) {
        const i = buf.search(/[\r\n]/);
        if (i < 0) {
          break;
        }
        if (buf[i] === "\r" && i === buf.length - 1) {
          sawCR = true;
        }
        const line = buf.slice(0, i);
        buf = buf.slice(buf[i] === "\r" && buf[i + 1] === "\n" ? i + 2 : i + 1);
        if (line === "") {
          if (data.length > 0) {
            const msg: SSEMessage = { id: lastId, event: event || "message", data: data.join("\n") };
            if (retry !== undefined) {
              msg.retry = retry;
            }
            yield msg;
          }
          event = "";
          data = [];
          retry = undefined;
          continue;
        }
        if (line.startsWith(":")) {
          continue;
        }
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? "" : line.slice(colon + 1);
        if (val.startsWith(" ")) {
          val = val.slice(1);
        }
        switch (field) {
          case "id":
            if (!val.includes("\0")) {
              lastId = val;
            }
            break;
          case "event":
            event = val;
            break;
          case "data":
            data.push(val);
            break;
          case "retry":
            if (/^\d+$/.test(val)) {
              retry = Number(val);
            }
            break;
        }
      }
    }
  } finally {
    reader.cancel().catch(() => {});
    try {
      reader.releaseLock();
    } catch {
      // already released
    }
  }
}
