export * from './types.js';
export {
  decodeEvent,
  decodeEventText,
  decodeToolCall,
  decodeToolOperation,
  decodeToolResult,
  decodeToolRetryReview,
  decodeToolReviewRecord,
  encodeEvent,
  encodeEventText,
  encodeToolCall,
  encodeToolOperation,
  encodeToolResult,
  encodeToolRetryReview,
  encodeToolReviewRecord,
} from './codec.js';
export { validatePhysicalLog } from './physical-log.js';
