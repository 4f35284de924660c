export {
  connectMcpServer,
  importMcpTools,
  mcpToolEffect,
  mcpToolRevision,
  MCP_IDEMPOTENCY_META_KEY,
  type McpConnection,
  type McpImportedTool,
  type McpImportOptions,
  type McpServerAddress,
  type McpToolAnnotations,
  type McpToolDescription,
  type McpToolImport,
} from './bridges/mcp.js';
