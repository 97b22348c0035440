/** Generic RxJS operators of acta. They import only rxjs. */
export { bufferBounded, type BufferBoundedConfig } from './bufferBounded';
export { backoffDelay, retryBackoff, type RetryBackoffConfig } from './retryBackoff';
export { monotonicScheduler } from './monotonicScheduler';
export { setImmediateScheduler } from './setImmediateScheduler';
