// The keel CLI against both servers: connection flags before the command
// (as `nats -s URL ...` users type them) and the sentences errors print.
import { execFile } from 'node:child_process';

// Run keel with args; resolves to { code, out, err } (never rejects).
function keel(ctx, args) {
  return new Promise((resolve) => {
    execFile(process.env.KEEL, args, { timeout: 20000 },
      (e, out, err) => resolve({ code: e ? e.code : 0, out, err }));
  });
}

// A --json output parsed, or the text when it is not JSON.
function json(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

export const cases = [
  {
    name: 'keel -s URL stream add then --server URL stream ls --json',
    run: async (ctx) => {
      const add = await keel(ctx, ['-s', ctx.url, 'stream', 'add', ctx.uniq,
        '--subjects', `${ctx.uniq}.>`]);
      const ls = await keel(ctx, ['--server', ctx.url, 'stream', 'ls',
        '--json']);
      const mine = [json(ls.out)].flat()
        .filter((s) => s?.config?.name === ctx.uniq);
      return { add: add.code, ls: ls.code, mine };
    },
  },
  {
    name: 'keel stream -s URL info NAME --json between the command words',
    run: async (ctx) => {
      await keel(ctx, ['-s', ctx.url, 'stream', 'add', ctx.uniq,
        '--subjects', `${ctx.uniq}.>`]);
      const r = await keel(ctx, ['stream', '-s', ctx.url, 'info', ctx.uniq,
        '--json']);
      return { code: r.code, subjects: json(r.out)?.config?.subjects };
    },
  },
  {
    name: 'keel consumer next on a missing consumer says it is not found',
    run: async (ctx) => {
      await keel(ctx, ['-s', ctx.url, 'stream', 'add', ctx.uniq,
        '--subjects', `${ctx.uniq}.>`]);
      const r = await keel(ctx, ['-s', ctx.url, 'consumer', 'next', ctx.uniq,
        'nosuch', '--timeout', '2s']);
      return { code: r.code, err: r.err };
    },
  },
  {
    name: 'keel req with nobody listening says there are no responders',
    run: async (ctx) => {
      const r = await keel(ctx, ['-s', ctx.url, 'req', `${ctx.uniq}.none`,
        'x']);
      return { code: r.code, err: r.err };
    },
  },
  {
    name: 'keel -s URL pub then a JetStream publish is stored',
    run: async (ctx) => {
      await keel(ctx, ['-s', ctx.url, 'stream', 'add', ctx.uniq,
        '--subjects', `${ctx.uniq}.>`]);
      const p = await keel(ctx, ['-s', ctx.url, 'pub', `${ctx.uniq}.a`, 'hi',
        '--jetstream']);
      const g = await keel(ctx, ['-s', ctx.url, 'stream', 'get', ctx.uniq,
        '1', '--json']);
      return { pub: p.code, err: p.err, subject: json(g.out)?.message?.subject };
    },
  },
];
