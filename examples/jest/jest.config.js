// A Jest project that tests code using zgc-runtime (docs/testing-with-jest.md):
//   npx jest --config examples/jest/jest.config.js
module.exports = {
  rootDir: __dirname,
  testEnvironment: 'node',
  // expect(...).toMatchTensor(...) in every test file.
  setupFilesAfterEnv: ['<rootDir>/setup.js'],
};
