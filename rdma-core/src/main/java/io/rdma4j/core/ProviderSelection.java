package io.rdma4j.core;

/**
 * Which provider a transport runs on and why, in two forms: {@link #summary()} for the one line a log or a demo
 * prints (e.g. {@code tcp (auto: no RDMA device found; run rdma4j-doctor.jar for details)} from {@link #toString()}), and
 * {@link #reason()}, every provider's full story with advice, for the doctor and DEBUG logs.
 *
 * @param provider the provider's name, e.g. {@code verbs} or {@code tcp}
 * @param reason   the detailed reason, e.g. {@code auto: verbs unusable: no RDMA devices: ... ; software provider: ...}
 * @param summary  the short reason, one clause
 */
public record ProviderSelection(String provider, String reason, String summary) {

    /** Where the details are, for summaries that leave them out. */
    public static final String DOCTOR_HINT = "run rdma4j-doctor.jar for details";

    /** A selection whose reason is short enough to be its own summary. */
    public ProviderSelection(String provider, String reason) {
        this(provider, reason, reason);
    }

    /** This selection without {@link #DOCTOR_HINT}: for the doctor's own output, which has the details. */
    public ProviderSelection withoutDoctorHint() {
        return new ProviderSelection(provider, reason, summary.replace("; " + DOCTOR_HINT, ""));
    }

    /** The short form, e.g. {@code tcp (auto: no RDMA device found; run rdma4j-doctor.jar for details)}. */
    @Override
    public String toString() {
        return provider + " (" + summary + ")";
    }
}
