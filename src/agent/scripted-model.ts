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
 */
export function scriptedModel(turns: readonly ScriptedTurn[]): ScriptedModel {
  const queue = [...turns];
  const requests: ChatRequest[] = [];
  return {
    requests,
    async complete(request) {
      requests.push(structuredClone(request) as ChatRequest);
      const turn = queue.shift();
      if (turn === undefined) throw new Error(`the scripted model has no answer for request ${requests.length}`);
      return typeof turn === 'function' ? turn(request) : turn;
    },
  };
}
