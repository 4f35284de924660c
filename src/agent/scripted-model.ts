import { ChatModelError, InvalidInputError } from '../errors.js';
import { describeValue } from '../text.js';
import type { ChatModel, ChatRequest, ChatResponse } from './model.js';

/** One scripted answer: a fixed response, or one computed from the request (say, from the last tool result). */
export type ScriptedTurn = ChatResponse | ((request: ChatRequest) => ChatResponse | Promise<ChatResponse>);

export interface ScriptedModel extends ChatModel {
  /** Every request the model received, in order (deep copies): what the model saw. */
  readonly requests: ChatRequest[];
}

/**
 * A model that answers from a script, for tests and examples. Each `complete` takes the next turn; running out of
 * turns is an error, so a test notices an agent that asks more often than expected.
 *
 * The script's position is this object's, not the conversation's: a fresh `scriptedModel` in a process that resumes
 * a run answers the run's next step with its first turn. A turn asking for a tool the journal already ran is a new
 * action and runs. To resume across processes, use turns that read the request's messages, or a script that starts
 * at the step the run resumes at.
 */
export function scriptedModel(turns: readonly ScriptedTurn[]): ScriptedModel {
  if (!Array.isArray(turns)) throw new InvalidInputError('turns', `must be an array of scripted turns, got ${describeValue(turns)}`);
  const queue = [...turns];
  const requests: ChatRequest[] = [];
  return {
    requests,
    async complete(request) {
      requests.push(structuredClone(request) as ChatRequest);
      const turn = queue.shift();
      if (turn === undefined) throw new ChatModelError('model_script_exhausted', `the scripted model has no answer for request ${requests.length}`);
      return typeof turn === 'function' ? turn(request) : turn;
    },
  };
}
