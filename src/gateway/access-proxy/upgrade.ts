import { type IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';

/**
 * The access proxy's upgraded connections (exec, attach, port-forward and cp over SPDY/3.1 or
 * WebSocket, `v5.channel.k8s.io` included): once the target answered 101, its head goes to the
 * client as it came, and the two connections are joined byte for byte in both directions with
 * back-pressure (`pipe`: a side that cannot take more pauses the other) until either ends.
 */

/**
 * The response to an upgrade request, written on its connection (the server's `upgrade` event
 * hands over the bare socket): refusals and a target's non-101 answer go out as on any request,
 * and the connection closes after them. Detached before a 101 is relayed on the socket.
 */
export function upgradeResponse(request: IncomingMessage, socket: Duplex): ServerResponse {
  const response = new ServerResponse(request);
  response.shouldKeepAlive = false;
  response.assignSocket(socket as Socket);
  response.once('finish', () => {
    response.detachSocket(socket as Socket);
    socket.end();
  });
  return response;
}

/** The 101 head of the target's answer, as the client gets it: status line and every header as sent. */
export function switchingProtocolsHead(answer: IncomingMessage): string {
  const lines = [`HTTP/1.1 101 ${answer.statusMessage || 'Switching Protocols'}`];
  const raw = answer.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) lines.push(`${raw[i]}: ${raw[i + 1]}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/** The two ends of an upgraded connection: the client's and the target's, each with the bytes already read past the head. */
export interface UpgradedPair {
  readonly client: Duplex;
  /** Bytes the client sent after its request's head (the server's `upgrade` event's `head`). */
  readonly clientHead: Buffer;
  readonly upstream: Duplex;
  /** Bytes the target sent after its 101 head. */
  readonly upstreamHead: Buffer;
}

/**
 * Sends the 101 head to the client and joins the two connections. Resolves once both are closed:
 * when one side closes the other is ended once what was written to it went out (cut at once
 * when the side closed on an error).
 */
export function joinUpgraded(answer: IncomingMessage, pair: UpgradedPair): Promise<void> {
  const { client, upstream } = pair;
  client.write(switchingProtocolsHead(answer));
  if (pair.upstreamHead.length > 0) client.write(pair.upstreamHead);
  if (pair.clientHead.length > 0) upstream.write(pair.clientHead);
  return new Promise<void>((resolve) => {
    let open = 2;
    const closed = () => {
      open -= 1;
      if (open === 0) resolve();
    };
    const sides: readonly [Duplex, Duplex][] = [
      [client, upstream],
      [upstream, client],
    ];
    for (const [side, other] of sides) {
      side.once('close', () => {
        // What was written to the other side still goes out before it closes; an error cuts it.
        if (side.errored || other.writableFinished) other.destroy();
        else {
          other.once('finish', () => other.destroy());
          other.end();
        }
        closed();
      });
      // An error is followed by close; without a listener it would be thrown.
      side.on('error', () => undefined);
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
}
