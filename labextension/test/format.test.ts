// What the sidebar and the status item print, checked without a browser.
import { describe, expect, it } from 'vitest';
import type { IRow } from '../src/api';
import {
  age,
  brief,
  clock,
  crashProgressLine,
  headline,
  humanBytes,
  label,
  numbers,
  progressLine,
  progressPercent,
  remoteLine,
  resumeLine,
  shape,
  storeDetails,
  storeLine
} from '../src/format';

/** A row as GET checkpoints gives it: the record, its number in the session, its place in the tree. */
function row(id: number, number: number, extra: Partial<IRow> = {}): IRow {
  return {
    id,
    session: 'a.ipynb',
    parent: null,
    time: 0,
    cell: id,
    trigger: 'cell',
    status: 'ok',
    tag: null,
    message: null,
    new_bytes: 0,
    total_bytes: 0,
    changed: [],
    kernel_start: false,
    number,
    depth: 0,
    branch_from: null,
    ...extra
  };
}

describe('numbers', () => {
  it('names a checkpoint by the number the server gave it in its notebook, else by its id', () => {
    const n = numbers([row(12, 1), row(41, 3, { depth: 1, branch_from: 12 }), row(40, 2)]);
    expect([label(n, 12), label(n, 40), label(n, 41)]).toEqual(['#1', '#2', '#3']);
    expect(label(n, 7)).toBe('(id 7)');
  });
});

describe('headline', () => {
  it('sums a checkpoint up in one line under its name', () => {
    const r = row(40, 2, { cell: 5, trigger: 'restore', status: 'error', time: 3600 });
    expect(headline(r, '#2')).toBe(`#2 [5] · ${clock(3600)} · restore · error`);
    expect(headline({ ...r, cell: null }, '#2')).toBe(`#2  · ${clock(3600)} · restore · error`);
  });
});

describe('age', () => {
  it('says how long ago as jupyter_ckpt.format.age does: seconds, minutes, hours, then days', () => {
    const seconds = [-3, 4.6, 59.4, 125, 3599, 5400, 47.9 * 3600, 48 * 3600, 3.4 * 86400, 10.6 * 86400];
    expect(seconds.map(age)).toEqual([
      '0 s',
      '5 s',
      '59 s',
      '2 min',
      '60 min',
      '1.5 h',
      '47.9 h',
      '2 days',
      '3 days',
      '11 days'
    ]);
  });
});

describe('sizes, progress and values', () => {
  it('reads as a person would say it', () => {
    expect([humanBytes(512), humanBytes(1536), humanBytes(3 * 1024 ** 3), humanBytes(-1)]).toEqual([
      '512 B',
      '1.5 KiB',
      '3.0 GiB',
      '-'
    ]);
    const progress = { what: 'restoring kernel checkpoint #3', done: 1.2 * 1024 ** 3, total: 4 * 1024 ** 3 };
    expect(progressLine(progress)).toBe('restoring kernel checkpoint #3: 1.2 GiB of 4.0 GiB');
    expect(progressPercent(progress)).toBe('Restoring kernel checkpoint #3… 30%');
    expect(crashProgressLine('a.ipynb', progress)).toBe(
      'The kernel of a.ipynb crashed: restoring kernel checkpoint #3: 1.2 GiB of 4.0 GiB'
    );
    expect(crashProgressLine('a.ipynb', { what: 'restoring its last good state', done: 0, total: 0 })).toBe(
      'The kernel of a.ipynb crashed: restoring its last good state…'
    );
    expect(progressPercent({ what: 'saving a kernel checkpoint', done: 0, total: 0 })).toBe(
      'Saving a kernel checkpoint… 0%'
    );
  });

  it('gives a long value by its shape and size', () => {
    const frame = { type: 'DataFrame', size: 2048, shape: [5000, 4], repr: 'x'.repeat(61) };
    expect(shape(frame)).toBe('(5000, 4)');
    expect(brief(frame)).toBe('(5000, 4) 2.0 KiB');
    expect(brief({ type: 'int', size: 28, repr: '42' })).toBe('42');
  });
});

describe('remoteLine', () => {
  const remote = { url: 's3://b/alice', behind: 0, behind_bytes: 0, error: null };
  it('says nothing without a remote store, or when it holds everything', () => {
    expect(remoteLine(null)).toBe('');
    expect(remoteLine(remote)).toBe('');
  });
  it('says how much is not uploaded yet', () => {
    expect(remoteLine({ ...remote, behind: 2, behind_bytes: 3 * 1024 * 1024 })).toBe(
      's3://b/alice: 2 not uploaded yet (3.0 MiB)'
    );
  });
  it('says why the store cannot be reached', () => {
    expect(remoteLine({ ...remote, behind: 1, error: 'access denied' })).toBe(
      's3://b/alice: cannot be reached (access denied)'
    );
  });
});

describe('storeLine', () => {
  const store = { size: 96.5 * 2 ** 20, budget: 128 * 2 ** 20, free: 300 * 2 ** 20, floor: 51 * 2 ** 20, why: 'max_store_size' };
  it("shows the store's size against its budget, and nothing without a store", () => {
    expect(storeLine(store)).toBe('store: 96.5 MiB of 128.0 MiB (75%)');
    expect(storeLine(null)).toBe('');
  });
  it('says in full what sets the budget and what the disk keeps free', () => {
    expect(storeDetails(store)).toContain('128.0 MiB budget (max_store_size)');
    expect(storeDetails(store)).toContain('at least 51.0 MiB always left');
  });
});

describe('resumeLine', () => {
  it('names the state a new kernel can resume: its number, cell, age and variables', () => {
    const offer = { checkpoint: 40, number: 12, cell: 9, time: 1000, variables: 7, checkpoints: 14 };
    expect(resumeLine(offer, 1000 + 9000)).toBe('Resume where you left off: #12 after cell [9], 2.5 h ago, 7 variables');
    expect(resumeLine({ ...offer, cell: null, variables: 1 }, 1030)).toBe(
      'Resume where you left off: #12, 30 s ago, 1 variable'
    );
  });
});
