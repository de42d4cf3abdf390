/** Test support: waits for a condition that something else makes true (a socket closing, a stream ending). */

/**
 * Resolves once `condition()` holds, asking every `everyMs` (a test that must act the moment it holds,
 * such as a kill mid-processing, asks more often); throws naming `what` after `timeoutMs`.
 */
export async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 5000, everyMs = 20): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
