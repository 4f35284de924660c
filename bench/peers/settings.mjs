/** B4 counts per mode (kept apart from b4.mjs so reading them needs no peer installed). */
export const SETTINGS = {
  full: { runs: 5, n: 200, warmup: 10 },
  quick: { runs: 2, n: 4, warmup: 1 },
};
