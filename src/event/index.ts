export * from './types.js';
export {
  decodeEvent,
  decodeEventText,
  decodeToolCall,
  decodeToolOperation,
  decodeToolResult,
  decodeToolRetryReview,
  encodeEvent,
  encodeEventText,
  encodeToolCall,
  encodeToolOperation,
  encodeToolResult,
  encodeToolRetryReview,
} from './codec.js';
export { validatePhysicalLog } from './physical-log.js';
