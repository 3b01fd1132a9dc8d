// Tensor matchers for Jest: expect.extend(require('zgc-runtime/jest')), or
// import matchers from 'zgc-runtime/jest'; expect.extend(matchers).

/** What toMatchTensor compares: a Tensor, a TypedArray, a (nested) array of numbers, or a number. */
export type TensorLike = { dtype?: string; shape?: readonly number[]; data: ArrayLike<number> } | ArrayLike<number> | readonly unknown[] | number;

export interface TensorMatchOptions {
  /** Absolute tolerance (default 1e-8). */
  atol?: number;
  /** Relative tolerance, times |expected| (default 1e-5): numpy.allclose's rule. */
  rtol?: number;
  /** NaN matches NaN (default true). */
  equalNaN?: boolean;
}

export declare function toMatchTensor(this: unknown, received: unknown, expected: TensorLike, options?: TensorMatchOptions): { pass: boolean; message(): string };

declare const matchers: { toMatchTensor: typeof toMatchTensor };
export default matchers;

interface ZgcTensorMatchers<R> {
  /**
   * Shapes and dtypes agree (where both sides state them) and every element is within
   * `atol + rtol * |expected|`; the failure names the first differing index and the max error.
   */
  toMatchTensor(expected: TensorLike, options?: TensorMatchOptions): R;
}

declare module 'expect' {
  interface Matchers<R extends void | Promise<void>, T = unknown> extends ZgcTensorMatchers<R> {}
}

declare global {
  namespace jest {
    interface Matchers<R, T = {}> extends ZgcTensorMatchers<R> {}
  }
}
