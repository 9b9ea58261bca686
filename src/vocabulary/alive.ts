/**
 * Card probes do not keep the event loop alive (a Meter never waits on a driver that does not
 * answer: its open() has its own timer). A caller that does wait for one — a tool measuring idle,
 * giul-probe --watch — holds the loop open itself while it waits.
 */
export async function whileAlive<T>(pending: Promise<T>): Promise<T> {
  const hold = setInterval(() => {}, 60_000);
  try {
    return await pending;
  } finally {
    clearInterval(hold);
  }
}
