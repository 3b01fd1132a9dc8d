'use strict';

// Decoupled models (Triton's model_transaction_policy { decoupled: true }): one request, any
// number of responses. For a ZGC artifact that is a STATE graph run step after step on state of
// the request's own (a pool sequence), the request's inputs given at each step: every step's
// outputs are a response, until the config's stop output says stop (its first element is not
// 0) or maxSteps steps have run. The last response carries Triton's triton_final_response true.

const RULE = '"decoupled" must be { "maxSteps": steps at most (64), "stopOutput": the output whose first element, once not 0, ends the request }';

/** config.json's "decoupled", checked: `{ maxSteps, stopOutput }`, or undefined. */
function checkDecoupled(value, where) {
  if (value === undefined) return undefined;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Error(`${where}: ${RULE}, got ${JSON.stringify(value)}`);
  for (const key of Object.keys(value)) {
    if (key !== 'maxSteps' && key !== 'stopOutput') throw new Error(`${where}: "decoupled" has an unknown key "${key}" (known: maxSteps, stopOutput)`);
  }
  const { maxSteps = 64, stopOutput } = value;
  if (!Number.isSafeInteger(maxSteps) || maxSteps < 1 || maxSteps > 1e6) throw new Error(`${where}: "decoupled" "maxSteps" must be an integer from 1 to 1000000, got ${JSON.stringify(maxSteps)}`);
  if (stopOutput !== undefined && (typeof stopOutput !== 'string' || stopOutput === '')) throw new Error(`${where}: "decoupled" "stopOutput" must name an output, got ${JSON.stringify(stopOutput)}`);
  return { maxSteps, stopOutput };
}

/** At load, against the artifact: its steps share STATE, and the stop output is one of its outputs. */
function checkDecoupledModel(decoupled, signature, runtime) {
  if (!runtime.sources.some((s) => s.kind === 'state')) throw new Error('config "decoupled": the artifact has no STATE source, so its steps would all answer the same');
  if (decoupled.stopOutput !== undefined && !signature.outputByName.has(decoupled.stopOutput)) {
    throw new Error(`config "decoupled" "stopOutput" names "${decoupled.stopOutput}", which is no output (outputs: ${signature.outputs.map((o) => o.name).join(', ')})`);
  }
}

/**
 * Runs `inputs` on version `v` step after step, on state of their own; `onStep(tensors,
 * final)` gets each step's outputs. Resolves the number of steps run.
 */
async function runDecoupled(v, inputs, signal, onStep) {
  const { maxSteps, stopOutput } = v.config.decoupled;
  const stop = stopOutput === undefined ? -1 : v.signature.outputByName.get(stopOutput).index;
  const sequence = v.pool.sequence();
  try {
    for (let step = 1; ; step++) {
      const tensors = await sequence.run(inputs, signal === undefined ? undefined : { signal });
      const final = step >= maxSteps || (stop >= 0 && tensors[stop].data[0] !== 0);
      onStep(tensors, final);
      if (final) return step;
    }
  } finally {
    await sequence.close();
  }
}

module.exports = { checkDecoupled, checkDecoupledModel, runDecoupled };
