#!/usr/bin/env node
/** giul-agent: placeholder until the agent lands (it serves GET /power over HTTP). */
process.stderr.write("giul-agent: not implemented yet\n");
process.exitCode = 2;
