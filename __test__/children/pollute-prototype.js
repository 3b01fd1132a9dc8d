'use strict';

// Preloaded (`node -r`) by runtime/inputs.spec.js: an enumerable name on Object.prototype,
// as a dependency with a prototype-pollution bug would leave, before the CLI starts.
// eslint-disable-next-line no-extend-native
Object.prototype.polluted = [100, 100, 100, 100];
