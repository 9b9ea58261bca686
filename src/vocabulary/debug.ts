import { debuglog } from "node:util";

/** Debug output, silent unless `NODE_DEBUG=giul`. */
export const debug = debuglog("giul");
