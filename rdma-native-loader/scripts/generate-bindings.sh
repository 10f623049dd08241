#!/usr/bin/env bash
# Regenerates the committed FFM bindings for libibverbs and librdmacm.
#
# Inputs (pin these when regenerating; the committed sources were made with exactly these):
#   - headers: Debian 12 packages libibverbs-dev 44.0-2 and librdmacm-dev 44.0-2
#     (rdma-core 44): /usr/include/infiniband/verbs.h and /usr/include/rdma/rdma_cma.h
#   - jextract: openjdk/jextract built against JDK 25 and libclang 14.0.6 (Debian libclang1-14),
#     on PATH as `jextract`. jextract is not part of this project and is never committed.
#
# Only what the project uses is generated (--include-*), so the bindings stay reviewable.
# Both headers go through ONE run: rdma_cma.h embeds verbs structs (ibv_ah_attr in rdma_ud_param),
# and two runs would duplicate them in two packages.
#
# Usage: rdma-native-loader/scripts/generate-bindings.sh   (from anywhere)
set -euo pipefail

HERE="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$HERE/src/main/java"
PKG=io.rdma4j.nativeloader.bindings
VERBS_H=/usr/include/infiniband/verbs.h
RDMACM_H=/usr/include/rdma/rdma_cma.h
EXPECTED_VERSION=44.0-2

command -v jextract >/dev/null || { echo "jextract not on PATH" >&2; exit 1; }
for f in "$VERBS_H" "$RDMACM_H"; do
  [ -f "$f" ] || { echo "missing $f: apt-get install libibverbs-dev librdmacm-dev" >&2; exit 1; }
done
for p in libibverbs-dev librdmacm-dev; do
  v="$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || echo unknown)"
  [ "$v" = "$EXPECTED_VERSION" ] || echo "WARNING: $p is $v, the committed bindings come from $EXPECTED_VERSION" >&2
done

FUNCTIONS=(
  # device list / context
  ibv_get_device_list ibv_free_device_list ibv_get_device_name ibv_get_device_guid
  ibv_open_device ibv_close_device ibv_query_device
  # exported symbol; in verbs.h 44 the name is also a macro over the inline ___ibv_query_port
  ibv_query_port
  ibv_query_gid ibv_query_pkey
  # exported helper behind the static inline ibv_query_gid_ex (gives the GID type)
  _ibv_query_gid_ex
  ibv_node_type_str ibv_port_state_str ibv_event_type_str ibv_wc_status_str
  ibv_get_async_event ibv_ack_async_event
  # protection domain / memory registration (ibv_reg_mr: exported symbol; also a macro in 44)
  ibv_alloc_pd ibv_dealloc_pd ibv_reg_mr ibv_reg_mr_iova2 ibv_dereg_mr
  # completion channel / CQ
  ibv_create_comp_channel ibv_destroy_comp_channel ibv_create_cq ibv_destroy_cq
  ibv_get_cq_event ibv_ack_cq_events
  # queue pairs
  ibv_create_qp ibv_destroy_qp ibv_modify_qp ibv_query_qp
  # shared receive queues (ibv_post_srq_recv is static inline: ibv_context_ops.post_srq_recv)
  ibv_create_srq ibv_destroy_srq ibv_modify_srq ibv_query_srq
  # rdma_cm
  rdma_create_event_channel rdma_destroy_event_channel rdma_create_id rdma_destroy_id
  rdma_bind_addr rdma_listen rdma_resolve_addr rdma_resolve_route rdma_connect rdma_accept
  rdma_reject rdma_disconnect rdma_get_cm_event rdma_ack_cm_event rdma_create_qp rdma_destroy_qp
  rdma_event_str rdma_get_src_port rdma_get_dst_port
)
STRUCTS=(
  ibv_context ibv_context_ops ibv_device_attr ibv_port_attr ibv_gid_entry ibv_mr ibv_pd ibv_cq
  ibv_comp_channel ibv_qp ibv_qp_init_attr ibv_qp_cap ibv_qp_attr ibv_ah_attr ibv_global_route
  ibv_send_wr ibv_mw_bind_info ibv_recv_wr ibv_sge ibv_wc ibv_async_event
  ibv_srq ibv_srq_init_attr ibv_srq_attr
  rdma_event_channel rdma_cm_id rdma_conn_param rdma_ud_param rdma_cm_event rdma_route rdma_addr
  rdma_ib_addr
  sockaddr sockaddr_in sockaddr_in6 sockaddr_storage in_addr in6_addr
  # glibc internals behind pthread_mutex_t / pthread_cond_t (see TYPEDEFS)
  __pthread_mutex_s __pthread_internal_list __pthread_cond_s
)
UNIONS=( ibv_gid )
# Embedded by value in ibv_context, ibv_cq, ibv_qp, ibv_comp_channel (their sizes depend on them).
TYPEDEFS=( pthread_mutex_t pthread_cond_t __atomic_wide_counter )
CONSTANTS=(
  IBV_SYSFS_NAME_MAX IBV_SYSFS_PATH_MAX
  # enum ibv_access_flags
  IBV_ACCESS_LOCAL_WRITE IBV_ACCESS_REMOTE_WRITE IBV_ACCESS_REMOTE_READ IBV_ACCESS_REMOTE_ATOMIC
  IBV_ACCESS_MW_BIND IBV_ACCESS_ZERO_BASED IBV_ACCESS_ON_DEMAND IBV_ACCESS_HUGETLB
  IBV_ACCESS_RELAXED_ORDERING
  # enum ibv_wr_opcode
  IBV_WR_RDMA_WRITE IBV_WR_RDMA_WRITE_WITH_IMM IBV_WR_SEND IBV_WR_SEND_WITH_IMM IBV_WR_RDMA_READ
  IBV_WR_ATOMIC_CMP_AND_SWP IBV_WR_ATOMIC_FETCH_AND_ADD IBV_WR_LOCAL_INV IBV_WR_BIND_MW
  IBV_WR_SEND_WITH_INV
  # enum ibv_send_flags
  IBV_SEND_FENCE IBV_SEND_SIGNALED IBV_SEND_SOLICITED IBV_SEND_INLINE IBV_SEND_IP_CSUM
  # enum ibv_wc_status
  IBV_WC_SUCCESS IBV_WC_LOC_LEN_ERR IBV_WC_LOC_QP_OP_ERR IBV_WC_LOC_EEC_OP_ERR IBV_WC_LOC_PROT_ERR
  IBV_WC_WR_FLUSH_ERR IBV_WC_MW_BIND_ERR IBV_WC_BAD_RESP_ERR IBV_WC_LOC_ACCESS_ERR
  IBV_WC_REM_INV_REQ_ERR IBV_WC_REM_ACCESS_ERR IBV_WC_REM_OP_ERR IBV_WC_RETRY_EXC_ERR
  IBV_WC_RNR_RETRY_EXC_ERR IBV_WC_LOC_RDD_VIOL_ERR IBV_WC_REM_INV_RD_REQ_ERR IBV_WC_REM_ABORT_ERR
  IBV_WC_INV_EECN_ERR IBV_WC_INV_EEC_STATE_ERR IBV_WC_FATAL_ERR IBV_WC_RESP_TIMEOUT_ERR
  IBV_WC_GENERAL_ERR
  # enum ibv_wc_opcode and enum ibv_wc_flags
  IBV_WC_SEND IBV_WC_RDMA_WRITE IBV_WC_RDMA_READ IBV_WC_COMP_SWAP IBV_WC_FETCH_ADD IBV_WC_BIND_MW
  IBV_WC_LOCAL_INV IBV_WC_RECV IBV_WC_RECV_RDMA_WITH_IMM
  IBV_WC_GRH IBV_WC_WITH_IMM IBV_WC_WITH_INV
  # enum ibv_qp_type / ibv_qp_state / ibv_qp_attr_mask / ibv_mig_state / ibv_mtu
  IBV_QPT_RC IBV_QPT_UC IBV_QPT_UD IBV_QPT_RAW_PACKET IBV_QPT_XRC_SEND IBV_QPT_XRC_RECV
  IBV_QPS_RESET IBV_QPS_INIT IBV_QPS_RTR IBV_QPS_RTS IBV_QPS_SQD IBV_QPS_SQE IBV_QPS_ERR
  IBV_QPS_UNKNOWN
  IBV_QP_STATE IBV_QP_CUR_STATE IBV_QP_EN_SQD_ASYNC_NOTIFY IBV_QP_ACCESS_FLAGS IBV_QP_PKEY_INDEX
  IBV_QP_PORT IBV_QP_QKEY IBV_QP_AV IBV_QP_PATH_MTU IBV_QP_TIMEOUT IBV_QP_RETRY_CNT
  IBV_QP_RNR_RETRY IBV_QP_RQ_PSN IBV_QP_MAX_QP_RD_ATOMIC IBV_QP_ALT_PATH IBV_QP_MIN_RNR_TIMER
  IBV_QP_SQ_PSN IBV_QP_MAX_DEST_RD_ATOMIC IBV_QP_PATH_MIG_STATE IBV_QP_CAP IBV_QP_DEST_QPN
  IBV_MIG_MIGRATED IBV_MIG_REARM IBV_MIG_ARMED
  IBV_MTU_256 IBV_MTU_512 IBV_MTU_1024 IBV_MTU_2048 IBV_MTU_4096
  # enum ibv_srq_attr_mask
  IBV_SRQ_MAX_WR IBV_SRQ_LIMIT
  # enum ibv_port_state / link layer / transport / node type / gid type
  IBV_PORT_NOP IBV_PORT_DOWN IBV_PORT_INIT IBV_PORT_ARMED IBV_PORT_ACTIVE IBV_PORT_ACTIVE_DEFER
  IBV_LINK_LAYER_UNSPECIFIED IBV_LINK_LAYER_INFINIBAND IBV_LINK_LAYER_ETHERNET
  IBV_TRANSPORT_UNKNOWN IBV_TRANSPORT_IB IBV_TRANSPORT_IWARP IBV_TRANSPORT_USNIC
  IBV_TRANSPORT_USNIC_UDP IBV_TRANSPORT_UNSPECIFIED
  IBV_NODE_UNKNOWN IBV_NODE_CA IBV_NODE_SWITCH IBV_NODE_ROUTER IBV_NODE_RNIC IBV_NODE_USNIC
  IBV_NODE_USNIC_UDP IBV_NODE_UNSPECIFIED
  IBV_GID_TYPE_IB IBV_GID_TYPE_ROCE_V1 IBV_GID_TYPE_ROCE_V2
  # enum ibv_event_type (async events)
  IBV_EVENT_CQ_ERR IBV_EVENT_QP_FATAL IBV_EVENT_QP_REQ_ERR IBV_EVENT_QP_ACCESS_ERR
  IBV_EVENT_COMM_EST IBV_EVENT_SQ_DRAINED IBV_EVENT_PATH_MIG IBV_EVENT_PATH_MIG_ERR
  IBV_EVENT_DEVICE_FATAL IBV_EVENT_PORT_ACTIVE IBV_EVENT_PORT_ERR IBV_EVENT_LID_CHANGE
  IBV_EVENT_PKEY_CHANGE IBV_EVENT_SM_CHANGE IBV_EVENT_SRQ_ERR IBV_EVENT_SRQ_LIMIT_REACHED
  IBV_EVENT_QP_LAST_WQE_REACHED IBV_EVENT_CLIENT_REREGISTER IBV_EVENT_GID_CHANGE IBV_EVENT_WQ_FATAL
  # rdma_cm
  RDMA_CM_EVENT_ADDR_RESOLVED RDMA_CM_EVENT_ADDR_ERROR RDMA_CM_EVENT_ROUTE_RESOLVED
  RDMA_CM_EVENT_ROUTE_ERROR RDMA_CM_EVENT_CONNECT_REQUEST RDMA_CM_EVENT_CONNECT_RESPONSE
  RDMA_CM_EVENT_CONNECT_ERROR RDMA_CM_EVENT_UNREACHABLE RDMA_CM_EVENT_REJECTED
  RDMA_CM_EVENT_ESTABLISHED RDMA_CM_EVENT_DISCONNECTED RDMA_CM_EVENT_DEVICE_REMOVAL
  RDMA_CM_EVENT_MULTICAST_JOIN RDMA_CM_EVENT_MULTICAST_ERROR RDMA_CM_EVENT_ADDR_CHANGE
  RDMA_CM_EVENT_TIMEWAIT_EXIT
  RDMA_PS_TCP RDMA_PS_UDP RDMA_PS_IB RDMA_PS_IPOIB
  AF_INET AF_INET6
)

ARGS=(
  --target-package "$PKG"
  --header-class-name RdmaBindings
  # Libraries by soname: the distro's runtime packages ship only the .so.1 files.
  # NativeLibraries checks both load before any generated class is initialised.
  --library :libibverbs.so.1
  --library :librdmacm.so.1
  --output "$OUT"
)
for s in "${FUNCTIONS[@]}"; do ARGS+=(--include-function "$s"); done
for s in "${STRUCTS[@]}";   do ARGS+=(--include-struct "$s"); done
for s in "${UNIONS[@]}";    do ARGS+=(--include-union "$s"); done
for s in "${TYPEDEFS[@]}";  do ARGS+=(--include-typedef "$s"); done
for s in "${CONSTANTS[@]}"; do ARGS+=(--include-constant "$s"); done

rm -rf "$OUT/${PKG//.//}"
jextract "${ARGS[@]}" "$VERBS_H" "$RDMACM_H"
echo "generated into $OUT/${PKG//.//}: $(ls "$OUT/${PKG//.//}" | wc -l) files"
