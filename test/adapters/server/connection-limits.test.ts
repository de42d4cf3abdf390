/**
 * The HTTP server's connection caps and send deadline (issue 29, finding 8), on a real server and
 * real sockets: a slow reader is cut once its answer has waited `sendTimeoutMs` (it was held 60 s),
 * one address cannot open more than its share while an exempt proxy can, the total cap holds, and
 * nothing is kept of a closed connection.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { limitConnections, type ConnectionLimitOptions, type ConnectionLimits } from '../../../adapters/server/connection-limits.ts';
import { until } from '../../support/until.ts';

const BIG_ANSWER = Buffer.alloc(64 * 1024 * 1024, 'x');
const servers: Server[] = [];
after(() => servers.forEach((server) => server.close()));

async function serve(options: ConnectionLimitOptions): Promise<{ port: number; limits: ConnectionLimits; server: Server }> {
  const server = createServer((req, res) => (req.url === '/big' ? res.end(BIG_ANSWER) : res.end('ok')));
  const limits = limitConnections(server, options);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  servers.push(server);
  return { port: (server.address() as AddressInfo).port, limits, server };
}

/** A connection from `localAddress`: answers whether the server closed it within `ms`. */
async function open(port: number, localAddress = '127.0.0.1'): Promise<{ socket: Socket; closedWithin(ms: number): Promise<boolean> }> {
  const socket = connect({ port, host: '127.0.0.1', localAddress });
  socket.on('error', () => {});
  const closed = once(socket, 'close').then(() => true);
  await once(socket, 'connect');
  return {
    socket,
    closedWithin: (ms) => Promise.race([closed, new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms))]),
  };
}


describe('connection limits', () => {
  it('cuts a client that does not read its answer once the answer has waited sendTimeoutMs', async () => {
    const { port, limits, server } = await serve({ sendTimeoutMs: 300 });
    const reader = await open(port);
    const started = Date.now();
    reader.socket.pause();
    reader.socket.write('GET /big HTTP/1.1\r\nHost: x\r\n\r\n');
    // Seen from the server: a paused client learns of the close only when it reads again.
    const connections = () => new Promise<number>((resolve) => server.getConnections((_error, count) => resolve(count)));
    await until(() => limits.counts.sending === 1, 'the answer under way');
    let left = 1;
    while (left > 0 && Date.now() - started < 5000) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      left = await connections();
    }
    assert.equal(left, 0, 'the slow reader is cut');
    const took = Date.now() - started;
    assert.ok(took >= 300 && took < 2000, `after the send timeout, not long after: ${took} ms`);
    reader.socket.destroy();
    const fast = await fetch(`http://127.0.0.1:${port}/`);
    assert.equal(await fast.text(), 'ok', 'a client that reads is served');
    await until(() => limits.counts.sending === 0, 'no answer tracked');
  });

  it('serves pipelined requests, and cuts a pipelining client that does not read its answers', async () => {
    const { port, limits, server } = await serve({ sendTimeoutMs: 300 });
    // Two answers written at once: the second is queued behind the first with no socket of its own yet.
    const answers = await new Promise<string>((resolve) => {
      const client = connect({ port, host: '127.0.0.1' });
      let text = '';
      client.on('data', (chunk) => {
        text += String(chunk);
        if (text.split('HTTP/1.1 200').length === 3) {
          client.destroy();
          resolve(text);
        }
      });
      client.write('GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n');
    });
    assert.equal(answers.split('HTTP/1.1 200').length, 3, 'both answered');
    const reader = await open(port);
    reader.socket.pause();
    const started = Date.now();
    reader.socket.write('GET /big HTTP/1.1\r\nHost: x\r\n\r\nGET /big HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n');
    await until(() => limits.counts.sending === 1, 'the first answer under way, the others queued behind it');
    const connections = () => new Promise<number>((resolve) => server.getConnections((_error, count) => resolve(count)));
    await until(async () => (await connections()) === 0, 'the pipelining slow reader cut', 5_000);
    const took = Date.now() - started;
    assert.ok(took >= 300, `not before the send timeout: ${took} ms`);
    reader.socket.destroy();
    await until(() => limits.counts.sending === 0, 'no answer tracked');
  });

  it('caps connections per address, except for exempt peers, and forgets closed ones', async () => {
    const { port, limits } = await serve({ maxConnectionsPerAddress: 3, exempt: (address) => address === '127.0.0.2' });
    const first = await Promise.all([1, 2, 3].map(() => open(port)));
    const over = await open(port);
    assert.equal(await over.closedWithin(1000), true, 'the fourth from one address is closed');
    assert.equal(limits.counts.refused, 1);
    const proxy = await Promise.all([1, 2, 3, 4, 5].map(() => open(port, '127.0.0.2')));
    for (const connection of proxy) assert.equal(await connection.closedWithin(100), false, 'an exempt peer is not capped');
    const answer = await new Promise<string>((resolve) => {
      first[0]!.socket.once('data', (chunk) => resolve(String(chunk)));
      first[0]!.socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    });
    assert.match(answer, /^HTTP\/1.1 200/, 'the connections within the cap are served');
    for (const connection of [...first, ...proxy]) connection.socket.destroy();
    await until(() => limits.counts.addresses === 0, 'the closed connections forgotten');
    const again = await open(port);
    assert.equal(await again.closedWithin(100), false, 'a slot is free again');
    again.socket.destroy();
  });

  it('caps connections in total', async () => {
    const { port, limits } = await serve({ maxConnections: 4, maxConnectionsPerAddress: 0 });
    const held = await Promise.all(['127.0.0.1', '127.0.0.2', '127.0.0.3', '127.0.0.4'].map((address) => open(port, address)));
    const over = await open(port, '127.0.0.5');
    assert.equal(await over.closedWithin(1000), true, 'the fifth connection is closed');
    assert.equal(limits.counts.refused, 1);
    for (const connection of held) connection.socket.destroy();
  });
});
