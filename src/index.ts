// Public surface of giul. Filled in by src/ modules as they land.
export {};
