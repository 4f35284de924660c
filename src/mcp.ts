export {
  connectMcpServer,
  MCP_CONNECTION_EVENT,
  MCP_RECONNECT_DEFAULTS,
  type McpConnectOptions,
  type McpConnection,
  type McpConnectionEvent,
  type McpConnectionState,
  type McpReconnectOptions,
  type McpServerAddress,
} from './bridges/mcp-connection.js';
export {
  importMcpTools,
  listMcpTools,
  mcpToolEffect,
  mcpToolRevision,
  MCP_IDEMPOTENCY_META_KEY,
  type McpImportedTool,
  type McpImportOptions,
  type McpToolSource,
  type McpToolAnnotations,
  type McpToolDescription,
  type McpToolImport,
} from './bridges/mcp.js';
export { McpProbeError, McpUnavailableError } from './errors.js';
export { probeMcpIdempotency, probeMcpServer, type McpProbeOptions, type McpProbeReport } from './bridges/mcp-probe.js';
