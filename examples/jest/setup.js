expect.extend(require('zgc-runtime/jest'));
