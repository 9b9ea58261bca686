import type { PowerPoint } from "./scenario.js";

/** 100 ↔ 400 W, switching every `halfPeriodMs` (37 by default), for `seconds`: hard for every edge. */
export function squareWave(seconds: number, halfPeriodMs = 37): PowerPoint[] {
  const pts: PowerPoint[] = [];
  let high = false;
  for (let t = 0; t < seconds * 1000; t += halfPeriodMs) {
    pts.push([t, high ? 400 : 100]);
    high = !high;
    pts.push([t, high ? 400 : 100]);
  }
  return pts;
}
